"""Running a sweep: many settings x seeds as one compiled program per group, sharded over devices, resumable.

    from ppo_jax import sweep
    table = sweep.run("experiments/clip_eps.yaml", out="runs/clip_eps")   # a pandas DataFrame
    table = sweep.run({"grid": {"clip_eps": [0.1, 0.2]}, "seeds": 4})    # in memory, no directory

How it runs (see ``spec``, ``plan``, ``program``, ``execute`` in this package):
settings that share their static fields form a group, trained by one program,
``jax.jit(jax.vmap(task.train))`` over (setting, seed) pairs with the pair axis
sharded over every device. A group's pairs are cut into chunks as large as
XLA's memory estimate allows under the budget (or ``chunk_size``); each chunk is
written to the directory the moment it finishes, so a killed sweep loses at most
the chunk in flight and ``resume=True`` runs only the missing ones (and those whose
file is corrupt). One process writes a directory at a time: a second one is
refused, naming the first (``ppo_jax.storage.locks``), except parts of one sweep,
which share it and claim its chunks (``ppo_jax.sweep.claims``). Pair
``(setting, seed)`` uses ``jax.random.key(seed)``: the run of ``ppo-jax train --seed
seed`` (``ppo-jax rlhf --seed seed --pretrain-seed P``, P each of ``pretrain: {seeds:
[...]}``) with that setting's flags -- the same bits in a chunk of one pair, the same
to float32 rounding in a larger chunk, which is another program (docs/concepts/determinism.md).
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

import jax
import pandas as pd

from ppo_jax.errors import SpecError
from ppo_jax.segments import checkpoint_interval
from ppo_jax.storage.atomic import DISK_ERRORS
from ppo_jax.storage.locks import DirectoryLock
from ppo_jax.storage.provenance import collect_metadata
from ppo_jax.sweep import sweep_dir
from ppo_jax.sweep.calibrate import calibrate, samples_of, skip_reason
from ppo_jax.sweep.claims import Claims
from ppo_jax.sweep.execute import SweepPlan, describe_group, execute, from_process_0, shared_mode
from ppo_jax.sweep.plan import format_bytes, group_pairs, make_chunks, parse_bytes, parse_part, round_up, shape_key
from ppo_jax.sweep.program import Program, default_memory_budget, device_mesh, fit_program
from ppo_jax.sweep.spec import SweepSpec, load_spec


def _say(message: str) -> None:
    from tqdm.auto import tqdm

    tqdm.write(message, file=sys.stdout)


def _warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr, flush=True)


def default_cache_dir() -> Path | None:
    """$PPO_JAX_CACHE_DIR ("none" turns caching off), else $XDG_CACHE_HOME/ppo_jax/xla or ~/.cache/ppo_jax/xla.

    A program depends only on the static fields, the chunk size and the devices,
    so a resumed sweep, the parts of one, and later sweeps over other values of
    the same leaves all load it from here instead of compiling it again.
    """
    value = os.environ.get("PPO_JAX_CACHE_DIR")
    if value is not None:
        return None if value.lower() in ("", "none") else Path(value)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ppo_jax" / "xla"


@contextlib.contextmanager
def compilation_cache(path):
    """Use ``path`` as JAX's persistent compilation cache ("auto": default_cache_dir()), unless one is set already."""
    from jax.experimental.compilation_cache import compilation_cache as cache

    path = default_cache_dir() if path == "auto" else path
    if path is None or str(path).lower() == "none" or jax.config.jax_compilation_cache_dir:
        yield
        return
    Path(path).mkdir(parents=True, exist_ok=True)
    cache.reset_cache()
    jax.config.update("jax_compilation_cache_dir", str(path))
    try:
        yield
    finally:
        jax.config.update("jax_compilation_cache_dir", None)
        cache.reset_cache()


def plan_sweep(
    spec, *, chunk_size: int | str | None = None, memory_budget=None, stored: dict | None = None, log=_say
) -> SweepPlan:
    """Group, size and chunk a sweep (compiling one program per distinct shape to read its memory estimate).

    Chunk sizes: from ``stored`` (a directory's plan.json) if given; else
    ``chunk_size`` rounded up to a multiple of the device count; else the
    largest evenly-chunked size whose XLA memory estimate fits ``memory_budget``
    bytes per device (default: see ``ppo_jax.sweep.program.default_memory_budget``),
    compiled for the first group of each shape (``plan.shape_key``: groups that differ
    only in branch fields take its size); with ``chunk_size="auto"`` that size or a smaller
    one measured faster by short probes, where ``ppo_jax.sweep.calibrate`` probes (in one
    process on a CPU, shapes of at least 10^6 samples).
    """
    spec = load_spec(spec)
    mesh, groups = device_mesh(), group_pairs(spec)
    budget = parse_bytes(memory_budget) if isinstance(memory_budget, str) else memory_budget
    budget = budget or default_memory_budget()
    _check_chunk_size(chunk_size)
    programs: dict[int, Program] = {}
    by_shape: dict[tuple, int] = {}  # shape -> its first group
    if stored is not None:  # other processes than 0 get zeros here and process 0's sizes below
        sizes = [int(s) for s in stored.get("chunk_sizes") or [0] * len(groups)]
        if chunk_size is not None and stored.get("chunk_sizes"):
            log(f"note: the directory's plan fixes the chunk sizes ({sizes}); --chunk-size is ignored")
    elif chunk_size is not None and chunk_size != AUTO:
        sizes = [min(round_up(chunk_size, mesh.size), round_up(len(g.pairs), mesh.size)) for g in groups]
    else:
        sizes = []
        for g in groups:
            key = shape_key(g.cfg, len(g.pairs))
            if key in by_shape:  # only branches differ from a group sized already: its chunk size
                sizes.append(sizes[by_shape[key]])
                log(
                    f"group {g.index} ({describe_group(g, spec)}): the shape of group {by_shape[key]}, chunks of {sizes[-1]}"
                )
                continue
            by_shape[key] = g.index
            programs[g.index] = fit_program(
                spec.task, g.cfg, len(g.pairs), budget, mesh, spec.log_every, shared_mode(spec, g)
            )
            sizes.append(programs[g.index].size)
            log(
                f"group {g.index} ({describe_group(g, spec)}): {len(g.pairs)} pairs, chunks of {sizes[-1]}, "
                f"~{format_bytes(programs[g.index].memory)}/device, compiled in {programs[g.index].compile_seconds:.1f} s"
                + _remaining(groups, g, by_shape, programs)
            )
    calibrations = {}
    if chunk_size == AUTO and stored is None:
        for key, first in by_shape.items():
            shape_groups = [g for g in groups if shape_key(g.cfg, len(g.pairs)) == key]
            how = shared_mode(spec, shape_groups[0])
            calibrations[first] = calibrate(spec, shape_groups, sizes[first], mesh, how, log)
            for g in shape_groups:
                sizes[g.index] = calibrations[first].chosen
            log(f"group {first}: chunks of {calibrations[first].chosen} ({calibrations[first].note})")
    sizes = [int(s) for s in from_process_0(sizes)]
    return SweepPlan(spec, groups, sizes, make_chunks(groups, sizes), programs, mesh.size, budget, calibrations)


def _remaining(groups, done, by_shape: dict, programs: dict) -> str:
    """ "; about N s for K more" after a memory-estimate compile: the later groups of new shapes, at the mean
    compile time so far."""
    later = {shape_key(g.cfg, len(g.pairs)) for g in groups[done.index + 1 :]} - set(by_shape)
    if not later:
        return ""
    mean = sum(p.compile_seconds for p in programs.values()) / len(programs)
    return f"; about {mean * len(later):.0f} s more for {len(later)} more program(s) of other shapes"


def _metadata(sweep_plan: SweepPlan, command: list[str]) -> dict:
    spec = sweep_plan.spec
    return {
        **collect_metadata(command, spec.task.name),
        "status": "running",
        "sweep": {
            "name": spec.name,
            "envs": list(spec.envs),
            "axes": list(spec.axes),
            "num_settings": spec.num_combos,
            "num_seeds": len(spec.seeds),
            **({"num_pretrain_seeds": len(spec.pretrain_seeds)} if len(spec.pretrain_seeds) > 1 else {}),
            "num_pairs": spec.num_runs,
            "num_programs": len(sweep_plan.groups),
            "num_chunks": len(sweep_plan.chunks),
            "chunk_sizes": sweep_plan.chunk_sizes,
            "calibration": {str(g): c.to_dict() for g, c in sweep_plan.calibration.items()},
            "num_devices": sweep_plan.num_devices,
            "num_hosts": jax.process_count(),
            "memory_budget_bytes": sweep_plan.budget,
            "log_every": spec.log_every,
            "pretrain": spec.canonical.get("pretrain"),
        },
    }


def dry_run(spec, out=None, *, chunk_size=None, memory_budget=None, cache_dir="auto", log=_say) -> str:
    """What ``run`` would do: runs, programs and env steps logged at once, then chunks and memory per device as text.

    The first part (``log``) needs no compile. The chunk sizes then come from ``chunk_size`` or the
    directory's plan without compiling (the memory per device is then not estimated), else from one
    program per distinct shape compiled (as the sweep would, into the compilation cache, which the run
    then loads) to read XLA's memory estimate, after saying how many. Writes nothing but the cache.
    """
    spec, stored, state = load_spec(spec), None, ""
    if out is not None:
        out = Path(out).absolute()
        if sweep_dir.is_sweep_dir(out):
            stored = sweep_dir.check_out(out, spec, resume=True, force=False, joining=False)
            state = f"{out}: {len(sweep_dir.done_chunks(out))} of {len(stored['chunks'])} chunks done"
        else:
            sweep_dir.check_out(out, spec, resume=False, force=False, joining=False)
            state = f"{out}: a new sweep directory"
    groups, task = group_pairs(spec), spec.task
    runs, models = spec.num_runs, len(spec.pretrain_seeds)
    steps = (
        sum(task.num_updates(s.cfg) * task.steps_per_update(s.cfg) for s in spec.settings) * len(spec.seeds) * models
    )
    shapes = len({shape_key(g.cfg, len(g.pairs)) for g in groups})
    budget = parse_bytes(memory_budget) if isinstance(memory_budget, str) else memory_budget
    unit = "env steps" if task.env_field else "sequences"
    log(
        "\n".join(
            [
                f"sweep {spec.name} (task {task.name}): {len(spec.envs)} env(s) x {spec.num_combos} setting(s) x "
                + (f"{models} pretraining seeds x " if models > 1 else "")
                + f"{len(spec.seeds)} seed(s) = {runs} runs, {steps:,} {unit}",
                f"axes: {', '.join(spec.axes) or '(none)'}; log every {spec.log_every} update(s)",
                f"devices: {jax.device_count()} x {jax.devices()[0].platform}; memory budget "
                f"{format_bytes(budget or default_memory_budget())} per device",
                f"{len(groups)} program(s) (settings that share their static fields), {shapes} distinct shape(s):",
                *(f"  group {g.index}: {describe_group(g, spec)}: {len(g.pairs)} pairs" for g in groups),
            ]
        )
    )
    if chunk_size == AUTO and not (stored and stored.get("chunk_sizes")):  # probes take seconds to minutes
        log(_probe_plan(spec, groups) + " (planned here by memory alone)")
        chunk_size = None
    if chunk_size is None and not (stored and stored.get("chunk_sizes")):
        log(
            f"compiling {shapes} program(s), one per distinct shape, to read their memory estimates (seconds to "
            "a minute each; cached for the run); give --chunk-size to plan without compiling"
        )
    with compilation_cache(cache_dir):
        sweep_plan = plan_sweep(spec, chunk_size=chunk_size, memory_budget=memory_budget, stored=stored, log=log)
        programs = [sweep_plan.programs.get(g.program) for g in sweep_plan.groups]
    lines = [f"{len(sweep_plan.chunks)} chunk(s):"]
    estimated = {shape_key(g.cfg, len(g.pairs)): p for g, p in zip(sweep_plan.groups, programs, strict=True) if p}
    for g, size, program in zip(sweep_plan.groups, sweep_plan.chunk_sizes, programs, strict=True):
        count = sum(c.group == g.index for c in sweep_plan.chunks)
        program = program or estimated.get(shape_key(g.cfg, len(g.pairs)))
        memory = "memory not estimated (nothing compiled)" if program is None else f"~{format_bytes(program.memory)}"
        lines.append(f"  group {g.index}: {count} chunk(s) of {size}, {memory} per device")
    return "\n".join(lines + ([state] if state else []) + ["nothing was run (dry run)"])


def _probe_plan(spec: SweepSpec, groups: list) -> str:
    """Which shapes a run with ``--chunk-size auto`` would probe (``calibrate.skip_reason``), known without compiling."""
    platform, by_shape = jax.devices()[0].platform, {}
    for g in groups:
        first, total = by_shape.get(shape_key(g.cfg, len(g.pairs)), (g.index, 0))
        by_shape[shape_key(g.cfg, len(g.pairs))] = (first, total + samples_of(spec, [g]))
    why = {first: skip_reason(samples, platform, jax.process_count()) for first, samples in by_shape.values()}
    probed = [f"group {first}" for first, reason in why.items() if reason is None]
    if not probed:
        return "--chunk-size auto: the memory fit, " + "; ".join(f"group {g} {reason}" for g, reason in why.items())
    return (
        f"--chunk-size auto: the run probes the chunk sizes of {len(probed)} of {len(by_shape)} shape(s) "
        f"({', '.join(probed)}), seconds to a minute each"
    )


AUTO = "auto"


def parse_chunk_size(text) -> int | str | None:
    """``--chunk-size``: None, "auto", or a positive integer (SpecError otherwise)."""
    if text is None or text == AUTO or isinstance(text, int):
        _check_chunk_size(text)
        return text
    value = str(text).strip()
    if value.isdigit():
        return parse_chunk_size(int(value))
    raise SpecError(f"--chunk-size must be a positive integer or auto, got {text!r}.")


def _check_chunk_size(chunk_size) -> None:
    if chunk_size is None or chunk_size == AUTO:
        return
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise SpecError(f"--chunk-size must be a positive integer or auto, got {chunk_size}.")


def run(
    spec,
    out=None,
    *,
    resume: bool = False,
    force: bool = False,
    chunk_size: int | str | None = None,
    memory_budget: int | str | None = None,
    part: str | tuple[int, int] | None = None,
    cache_dir="auto",
    progress: bool = True,
    command: list[str] | None = None,
    checkpoint_every: str | None = None,
) -> pd.DataFrame:
    """Run a sweep and return its table (see ``ppo_jax.sweep.table``): one row per env x setting x seed x log step.

    Args:
      spec: a YAML path, a dict (see ``ppo_jax.sweep.spec``) or a SweepSpec.
      out: sweep directory (see ``ppo_jax.sweep.sweep_dir``); None runs in memory.
      resume: continue the sweep in ``out``, running only the chunks without a file (or with a corrupt one,
        moved into ``out/corrupt/``); a part with ``resume`` also takes over stale claims of other hosts.
      force: replace an existing sweep (or run) directory, deleted once this sweep completes.
      chunk_size: pairs per chunk (rounded up to a multiple of the device count),
        instead of the largest that fits ``memory_budget``; "auto": that or a smaller
        size measured faster by short probes (``ppo_jax.sweep.calibrate``; recorded in
        plan.json and metadata.json, kept on ``resume``). A run's numbers are those of a
        fixed ``chunk_size`` of the size chosen, bit for bit; another chunk size can change
        them at float32 rounding (XLA:CPU appears to round some reductions differently by batch size).
      memory_budget: bytes per device (int, or "8GiB", "500MB").
      part: ``"i/N"`` or ``(i, N)``: run only slice i of N of the chunks (SLURM
        arrays); parts share ``out``, claim each chunk (``ppo_jax.sweep.claims``) and the
        last to finish merges the table.
      cache_dir: persistent compilation cache; "auto": ``default_cache_dir()``; None: none.
      progress: show a bar over chunks and log lines.
      command: the command line recorded in metadata.json (default: sys.argv).
      checkpoint_every: run each chunk in segments and checkpoint its state every
        this many updates or percent of them ("10%"), so a resumed sweep loses at
        most a segment (``ppo_jax.sweep.segmented``; needs ``out``).

    Returns:
      The table of every finished chunk (all of them, unless a part of the sweep
      is still running elsewhere), in canonical row order.
    """
    spec, part = load_spec(spec), parse_part(part) if isinstance(part, str) else part
    memory_budget = parse_bytes(memory_budget) if isinstance(memory_budget, str) else memory_budget
    _check_chunk_size(chunk_size)
    progress = progress and jax.process_index() == 0  # one bar and log, from process 0, in a multi-host run
    log = _say if progress else (lambda message: None)
    if out is None and (resume or force or part or checkpoint_every):
        raise SpecError("resume, force, part and checkpoint_every need a sweep directory (out).")
    if checkpoint_every is not None:
        for setting in spec.settings:
            checkpoint_interval(checkpoint_every, spec.task.num_updates(setting.cfg))  # a bad value: before compiling
    lead = jax.process_index() == 0
    stored = claims = None
    with contextlib.ExitStack() as held:
        if out is not None:
            out = Path(out).absolute()
            if lead:  # the lock first: a second process is refused before it reads or compiles anything
                held.enter_context(DirectoryLock(out, shared=part is not None))
                stored = sweep_dir.check_out(out, spec, resume=resume, force=force, joining=part is not None)
                if part is not None:
                    claims = held.enter_context(Claims(out / sweep_dir.CLAIMS_DIR, take_over_remote=resume))
            if from_process_0(stored is not None):
                stored = stored or {}
            elif resume:
                log(f"nothing to resume in {out}: starting the sweep")
        with compilation_cache(cache_dir):
            sweep_plan = plan_sweep(spec, chunk_size=chunk_size, memory_budget=memory_budget, stored=stored, log=log)
            if out is not None and stored is None and lead:
                metadata = _metadata(sweep_plan, command or [sys.executable, *sys.argv])
                in_effect = sweep_dir.create(out, spec, sweep_plan.to_dict(), metadata, force=force)  # maybe a part's
                sweep_plan = sweep_plan._replace(chunk_sizes=in_effect["chunk_sizes"])
            try:
                return execute(
                    sweep_plan,
                    out,
                    part,
                    progress=progress,
                    log=log,
                    warn=_warn,
                    checkpoint_every=checkpoint_every,
                    claims=claims,
                )
            except OSError as error:
                if out is None or error.errno not in DISK_ERRORS or "--resume" in str(error):  # said already
                    raise
                detail = error.strerror + (f": {error.filename}" if error.filename else "")
                raise OSError(
                    error.errno,
                    f"{detail}. The files written before it are intact: free some space (or mend the disk), "
                    "then continue with --resume.",
                ) from error
