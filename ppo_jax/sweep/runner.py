"""Running a sweep: many settings x seeds as one compiled program per group, sharded over devices, resumable.

    from ppo_jax import sweep
    table = sweep.run("experiments/clip_eps.yaml", out="runs/clip_eps")   # a pandas DataFrame
    table = sweep.run({"grid": {"clip_eps": [0.1, 0.2]}, "seeds": 4})    # in memory, no directory

How it runs (see ``spec``, ``plan``, ``program``, ``resume`` in this package):
settings that share their static fields form a group, trained by one program,
``jax.jit(jax.vmap(task.train))`` over (setting, seed) pairs with the pair axis
sharded over every device. A group's pairs are cut into chunks as large as
XLA's memory estimate allows under the budget (or ``chunk_size``); each chunk is
written to the directory the moment it finishes, so a killed sweep loses at most
the chunk in flight and ``resume=True`` runs only the missing ones. Pair
``(setting, seed)`` uses ``jax.random.key(seed)``: its numbers are those of
``ppo-jax train --seed seed`` (``ppo-jax rlhf --seed seed --pretrain-seed P``)
with that setting's flags.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import jax
import numpy as np
import pandas as pd

from ppo_jax.errors import SpecError
from ppo_jax.segments import checkpoint_interval
from ppo_jax.storage.checkpoints import CHECKPOINT_DIR
from ppo_jax.storage.provenance import collect_metadata, now_iso
from ppo_jax.sweep import sweep_dir
from ppo_jax.sweep.plan import (
    Chunk,
    Group,
    format_bytes,
    group_pairs,
    make_chunks,
    parse_bytes,
    parse_part,
    part_slice,
    round_up,
)
from ppo_jax.sweep.program import (
    Program,
    Shared,
    compile_program,
    default_memory_budget,
    device_mesh,
    fit_program,
    prepare_shared_once,
    run_program,
)
from ppo_jax.sweep.segmented import programs_cache_clear, run_chunk_in_segments
from ppo_jax.sweep.spec import SweepSpec, load_spec
from ppo_jax.sweep.table import chunk_frame, sort_table, summarize


class SweepPlan(NamedTuple):
    """What a sweep runs: its groups (one program each), chunk size per group, and chunks."""

    spec: SweepSpec
    groups: list[Group]
    chunk_sizes: list[int]
    chunks: list[Chunk]
    programs: dict[int, Program]  # compiled while sizing, reused when running
    num_devices: int
    budget: int

    def to_dict(self) -> dict:
        groups = [
            {
                "group": g.index,
                "env": self.spec.task.env_of(g.cfg),
                "static": g.static,
                "num_pairs": len(g.pairs),
                "chunk_size": size,
                "memory_bytes": self.programs[g.index].memory if g.index in self.programs else None,
            }
            for g, size in zip(self.groups, self.chunk_sizes, strict=True)
        ]
        chunks = [{"id": c.chunk_id, "group": c.group, "pairs": [list(p) for p in c.pairs]} for c in self.chunks]
        return {"chunk_sizes": self.chunk_sizes, "num_devices": self.num_devices, "groups": groups, "chunks": chunks}


def _say(message: str) -> None:
    from tqdm.auto import tqdm

    tqdm.write(message, file=sys.stdout)


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


def _from_process_0(values) -> np.ndarray:
    """Process 0's int64 array on every process (multi-host); the array itself on one host."""
    values = np.asarray(values, dtype=np.int64)
    if jax.process_count() == 1:
        return values
    from jax.experimental import multihost_utils

    return np.asarray(multihost_utils.broadcast_one_to_all(values))


def plan_sweep(
    spec, *, chunk_size: int | None = None, memory_budget=None, stored: dict | None = None, log=_say
) -> SweepPlan:
    """Group, size and chunk a sweep (compiling one program per group to read its memory estimate).

    Chunk sizes: from ``stored`` (a directory's plan.json) if given; else
    ``chunk_size`` rounded up to a multiple of the device count; else the
    largest evenly-chunked size whose XLA memory estimate fits ``memory_budget``
    bytes per device (default: see ``ppo_jax.sweep.program.default_memory_budget``).
    """
    spec = load_spec(spec)
    mesh, groups = device_mesh(), group_pairs(spec)
    budget = parse_bytes(memory_budget) if isinstance(memory_budget, str) else memory_budget
    budget = budget or default_memory_budget()
    _check_chunk_size(chunk_size)
    programs: dict[int, Program] = {}
    if stored is not None:  # other processes than 0 get zeros here and process 0's sizes below
        sizes = [int(s) for s in stored.get("chunk_sizes") or [0] * len(groups)]
        if chunk_size is not None and stored.get("chunk_sizes"):
            log(f"note: the directory's plan fixes the chunk sizes ({sizes}); --chunk-size is ignored")
    elif chunk_size is not None:
        sizes = [min(round_up(chunk_size, mesh.size), round_up(len(g.pairs), mesh.size)) for g in groups]
    else:
        sizes = []
        for g in groups:
            programs[g.index] = fit_program(
                spec.task, g.cfg, len(g.pairs), budget, mesh, spec.log_every, shared_mode(spec)
            )
            sizes.append(programs[g.index].size)
            log(
                f"group {g.index} ({_describe(g, spec)}): {len(g.pairs)} pairs, chunks of {sizes[-1]}, "
                f"~{format_bytes(programs[g.index].memory)}/device, compiled in {programs[g.index].compile_seconds:.1f} s"
            )
    sizes = [int(s) for s in _from_process_0(sizes)]
    return SweepPlan(spec, groups, sizes, make_chunks(groups, sizes), programs, mesh.size, budget)


def shared_mode(spec: SweepSpec) -> Shared:
    """How the spec's programs get what settings share (``ppo_jax.sweep.program.Shared``)."""
    if not spec.task.shared_fields:
        return Shared("none")
    return Shared("per_setting" if spec.pretrain_per_setting else "once", spec.pretrain_seed)


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
            "num_pairs": len(spec.settings) * len(spec.seeds),
            "num_programs": len(sweep_plan.groups),
            "num_chunks": len(sweep_plan.chunks),
            "chunk_sizes": sweep_plan.chunk_sizes,
            "num_devices": sweep_plan.num_devices,
            "num_hosts": jax.process_count(),
            "memory_budget_bytes": sweep_plan.budget,
            "log_every": spec.log_every,
            "pretrain": spec.canonical.get("pretrain"),
        },
    }


def dry_run(spec, out=None, *, chunk_size=None, memory_budget=None, cache_dir="auto", log=_say) -> str:
    """What ``run`` would do, as text: runs, programs, chunks, memory per device, progress in ``out``.

    Compiles one program per group (as the sweep would; cached) to read XLA's
    memory estimate; writes nothing but the compilation cache.
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
    with compilation_cache(cache_dir):
        sweep_plan = plan_sweep(spec, chunk_size=chunk_size, memory_budget=memory_budget, stored=stored, log=log)
        mesh = device_mesh()
        programs = [_program(sweep_plan, g, mesh, log) for g in sweep_plan.groups]
    runs = len(spec.settings) * len(spec.seeds)
    task = spec.task
    steps = sum(task.num_updates(s.cfg) * task.steps_per_update(s.cfg) for s in spec.settings) * len(spec.seeds)
    unit = "env steps" if task.env_field else "sequences"
    lines = [
        f"sweep {spec.name} (task {task.name}): {len(spec.envs)} env(s) x {spec.num_combos} setting(s) x "
        f"{len(spec.seeds)} seed(s) = {runs} runs, {steps:,} {unit}",
        f"axes: {', '.join(spec.axes) or '(none)'}; log every {spec.log_every} update(s)",
        f"devices: {mesh.size} x {jax.devices()[0].platform}; memory budget {format_bytes(sweep_plan.budget)} per device",
        f"{len(sweep_plan.groups)} program(s), {len(sweep_plan.chunks)} chunk(s):",
    ]
    for g, size, program in zip(sweep_plan.groups, sweep_plan.chunk_sizes, programs, strict=True):
        count = sum(c.group == g.index for c in sweep_plan.chunks)
        lines.append(
            f"  group {g.index}: {_describe(g, spec)}: {len(g.pairs)} pairs in {count} chunk(s) of {size}, "
            f"~{format_bytes(program.memory)} per device"
        )
    return "\n".join(lines + ([state] if state else []) + ["nothing was run (dry run)"])


def _check_chunk_size(chunk_size) -> None:
    if chunk_size is not None and (isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1):
        raise SpecError(f"--chunk-size must be a positive integer, got {chunk_size}.")


def _describe(group: Group, spec: SweepSpec) -> str:
    return ", ".join(f"{k}={v}" for k, v in {"env": spec.task.env_of(group.cfg), **group.static}.items())


def _program(sweep_plan: SweepPlan, group: Group, mesh, log: Callable) -> Program:
    size = round_up(sweep_plan.chunk_sizes[group.index], mesh.size)  # a plan made on fewer devices: pad further
    program = sweep_plan.programs.get(group.index)
    if program is None or program.size != size:
        spec = sweep_plan.spec
        program = compile_program(spec.task, group.cfg, size, mesh, spec.log_every, shared_mode(spec))
        sweep_plan.programs[group.index] = program
        log(
            f"group {group.index} ({_describe(group, sweep_plan.spec)}): compiled for {size} pairs in {program.compile_seconds:.1f} s, "
            f"~{format_bytes(program.memory)}/device"
        )
        if program.memory > sweep_plan.budget:
            log(
                f"warning: that is over the memory budget of {format_bytes(sweep_plan.budget)}; use a smaller --chunk-size"
            )
    return program


def _shared(sweep_plan: SweepPlan, group: Group, log: Callable, shared: dict) -> tuple[object, float]:
    """What the group's pairs share (computed on first use, then kept in ``shared``), and the seconds it took now."""
    if group.index in shared:
        return shared[group.index], 0.0
    how = shared_mode(sweep_plan.spec)
    start = time.perf_counter()
    shared[group.index] = prepare_shared_once(sweep_plan.spec.task, group.cfg, how)
    seconds = time.perf_counter() - start
    if how.mode == "once":
        log(f"group {group.index}: shared pretraining (seed {how.seed}) in {seconds:.1f} s")
    return shared[group.index], seconds


def _run_chunk(
    sweep_plan: SweepPlan,
    chunk: Chunk,
    mesh,
    log: Callable,
    charged: set,
    shared: dict,
    checkpointing: tuple[str, Path] | None = None,
) -> tuple[pd.DataFrame, dict]:
    """Run one chunk; its info charges a program's compile time (and shared pretraining) to the first chunk that uses it.

    ``checkpointing = (checkpoint_every, directory)``: run it in segments, checkpointed
    into ``directory`` (``ppo_jax.sweep.segmented``; its programs compile on first use, inside run_seconds).
    """
    task, group = sweep_plan.spec.task, sweep_plan.groups[chunk.group]
    shared_values, pretrain_seconds = _shared(sweep_plan, group, log, shared)
    cfgs, seeds = [sweep_plan.spec.settings[i].cfg for i, _ in chunk.pairs], [seed for _, seed in chunk.pairs]
    start = time.perf_counter()
    if checkpointing is None:
        program = _program(sweep_plan, group, mesh, log)
        compile_seconds = 0.0 if id(program) in charged else program.compile_seconds
        charged.add(id(program))
        size, memory = program.size, program.memory
        start = time.perf_counter()
        metrics = run_program(program, task, cfgs, seeds, mesh, shared_values)
    else:
        every, directory = checkpointing
        size = round_up(sweep_plan.chunk_sizes[group.index], mesh.size)
        compile_seconds, memory = (
            0.0,
            sweep_plan.programs[group.index].memory if group.index in sweep_plan.programs else None,
        )
        interval = checkpoint_interval(every, task.num_updates(group.cfg))
        metrics = run_chunk_in_segments(
            task,
            cfgs,
            seeds,
            size,
            mesh,
            shared_values,
            shared_mode(sweep_plan.spec),
            log_every=sweep_plan.spec.log_every,
            interval=interval,
            directory=directory,
        )
    run_seconds = time.perf_counter() - start
    env_steps = sum(task.num_updates(c) * task.steps_per_update(c) for c in cfgs)
    info = {
        "chunk": chunk.chunk_id,
        "pairs": len(chunk.pairs),
        "padded_pairs": size - len(chunk.pairs),
        "compile_seconds": compile_seconds,
        "pretrain_seconds": pretrain_seconds,
        "run_seconds": run_seconds,
        "env_steps": env_steps,
        "env_steps_per_second": env_steps / run_seconds,
        "unit": task.sample_unit,
        "memory_bytes": memory,
        "segmented": checkpointing is not None,
        "devices": mesh.size,
        "host": socket.gethostname(),
        "finished": now_iso(),
    }
    return chunk_frame(sweep_plan.spec, chunk, metrics), info


def run(
    spec,
    out=None,
    *,
    resume: bool = False,
    force: bool = False,
    chunk_size: int | None = None,
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
      resume: continue the sweep in ``out``, running only the chunks without a file.
      force: replace an existing sweep (or run) directory, deleted once this sweep completes.
      chunk_size: pairs per chunk (rounded up to a multiple of the device count),
        instead of the largest that fits ``memory_budget``.
      memory_budget: bytes per device (int, or "8GiB", "500MB").
      part: ``"i/N"`` or ``(i, N)``: run only slice i of N of the chunks (SLURM
        arrays); parts share ``out`` and the last to finish merges the table.
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
    stored = None
    if out is not None:
        out = Path(out).absolute()
        if lead:
            stored = sweep_dir.check_out(out, spec, resume=resume, force=force, joining=part is not None)
        if _from_process_0(stored is not None):
            stored = stored or {}
        elif resume:
            log(f"nothing to resume in {out}: starting the sweep")
    with compilation_cache(cache_dir):
        sweep_plan = plan_sweep(spec, chunk_size=chunk_size, memory_budget=memory_budget, stored=stored, log=log)
        if out is not None and stored is None and lead:
            metadata = _metadata(sweep_plan, command or [sys.executable, *sys.argv])
            in_effect = sweep_dir.create(out, spec, sweep_plan.to_dict(), metadata, force=force)  # maybe another part's
            sweep_plan = sweep_plan._replace(chunk_sizes=in_effect["chunk_sizes"])
        return _execute(sweep_plan, out, part, progress, log, checkpoint_every)


def release_programs(sweep_plan: SweepPlan, group: int) -> None:
    """Free a group's compiled programs once its last chunk has run.

    Each program holds its machine code in memory; a sweep of many groups of large programs (Brax
    physics: 18 groups of ~1 GB of LLVM code and mappings) ran out of memory holding all of them.
    A later need recompiles, from the persistent compilation cache.
    """
    sweep_plan.programs.pop(group, None)
    programs_cache_clear()  # the segmented path's (--checkpoint-every) jitted functions
    jax.clear_caches()  # and every jit's compiled executables


def _execute(
    sweep_plan: SweepPlan, out: Path | None, part, progress: bool, log: Callable, checkpoint_every=None
) -> pd.DataFrame:
    sizes = [int(s) for s in _from_process_0(sweep_plan.chunk_sizes)]
    sweep_plan = sweep_plan._replace(chunk_sizes=sizes, chunks=make_chunks(sweep_plan.groups, sizes))
    mine = [sweep_plan.chunks[i] for i in part_slice(len(sweep_plan.chunks), part)]
    done = sweep_dir.done_chunks(out) if out is not None and jax.process_index() == 0 else set()
    pending_mask = _from_process_0([c.chunk_id not in done for c in mine])
    pending = [c for c, todo in zip(mine, pending_mask, strict=True) if todo]
    if out is not None and len(pending) < len(mine):
        log(f"resuming {out}: {len(mine) - len(pending)} of {len(mine)} chunks already done")
    mesh, frames, charged, shared = device_mesh(), {}, set(), {}
    from tqdm.auto import tqdm

    with tqdm(total=len(pending), unit="chunk", disable=not progress, dynamic_ncols=True) as bar:
        for chunk in pending:
            checkpointing = (
                None if checkpoint_every is None else (checkpoint_every, out / CHECKPOINT_DIR / chunk.chunk_id)
            )
            frame, info = _run_chunk(sweep_plan, chunk, mesh, log, charged, shared, checkpointing)
            if out is not None and jax.process_index() == 0:
                sweep_dir.write_chunk(out, chunk.chunk_id, frame, info)
                if checkpointing is not None:
                    shutil.rmtree(checkpointing[1], ignore_errors=True)
                    with contextlib.suppress(OSError):  # the last chunk's: no checkpoints left
                        checkpointing[1].parent.rmdir()
                sweep_dir.append_log(out, sweep_dir.log_line(info))
            elif out is None:
                frames[chunk.chunk_id] = frame
            log(sweep_dir.log_line(info))
            if not any(later.group == chunk.group for later in pending[pending.index(chunk) + 1 :]):
                release_programs(sweep_plan, chunk.group)
            bar.set_postfix_str(f"{info['env_steps_per_second']:,.0f} {info['unit']}/s", refresh=False)
            bar.update()
    if out is None:
        return sort_table(sweep_plan.spec, pd.concat(frames.values(), ignore_index=True))
    if jax.process_index() != 0:
        return pd.DataFrame()
    done = sweep_dir.done_chunks(out)
    ids = [c.chunk_id for c in sweep_plan.chunks if c.chunk_id in done]
    table = sort_table(sweep_plan.spec, sweep_dir.read_chunks(out, ids))
    if len(ids) == len(sweep_plan.chunks):
        if not (out / sweep_dir.TABLE_FILE).exists() or pending:
            sweep_dir.finish(out, table, summarize(sweep_plan.spec, table), sweep_dir.final_metadata(out, ids))
    else:
        log(f"{len(ids)} of {len(sweep_plan.chunks)} chunks done in {out}; the table is merged when all are")
    return table
