"""Running the chunks of a planned sweep: each chunk once, written as it finishes, then the merged table.

``ppo_jax.sweep.runner.run`` plans the sweep, takes the directory's lock and calls ``execute``. Process 0
(the one that writes) first checks the chunk files already in place (``sweep_dir.intact_chunks``: a corrupt
one is moved aside and runs again); with ``--part`` it claims each chunk before running it
(``ppo_jax.sweep.claims``: a chunk a live part holds is skipped); each finished chunk is written at once;
the process that finds every chunk done merges the table (again if the table or summary is corrupt).
Progress goes to stderr: a bar on a terminal, a plain line every 10% of the chunks in a log
(``ppo_jax.progress.ChunkProgress``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import jax
import numpy as np
import pandas as pd

from ppo_jax.progress import ChunkProgress
from ppo_jax.segments import checkpoint_interval
from ppo_jax.storage.checkpoints import CHECKPOINT_DIR
from ppo_jax.storage.provenance import git_state, now_iso
from ppo_jax.sweep import sweep_dir
from ppo_jax.sweep.claims import Claims
from ppo_jax.sweep.plan import Chunk, Group, format_bytes, make_chunks, part_slice, round_up
from ppo_jax.sweep.program import (
    Program,
    Shared,
    compile_program,
    device_mesh,
    log_updates,
    prepare_shared_once,
    run_program,
)
from ppo_jax.sweep.segmented import programs_cache_clear, run_chunk_in_segments
from ppo_jax.sweep.shared_fingerprint import shared_fingerprint
from ppo_jax.sweep.spec import SweepSpec
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
    calibration: dict = {}  # first group of a shape -> its ppo_jax.sweep.calibrate.Calibration (--chunk-size auto)

    def to_dict(self) -> dict:
        groups = [
            {
                "group": g.index,
                "env": self.spec.task.env_of(g.cfg),
                "static": g.static,
                "num_pairs": len(g.pairs),
                "chunk_size": size,
                "memory_bytes": self.programs[g.program].memory
                if g.program in self.programs and self.programs[g.program].size == size
                else None,
                **({"pretrain_seed": g.pretrain_seed} if len(self.spec.pretrain_seeds) > 1 else {}),
            }
            for g, size in zip(self.groups, self.chunk_sizes, strict=True)
        ]
        chunks = [{"id": c.chunk_id, "group": c.group, "pairs": [list(p) for p in c.pairs]} for c in self.chunks]
        calibration = {str(g): c.to_dict() for g, c in self.calibration.items()}
        return {
            "chunk_sizes": self.chunk_sizes,
            "num_devices": self.num_devices,
            "groups": groups,
            "chunks": chunks,
            **({"calibration": calibration} if calibration else {}),
        }


def from_process_0(values) -> np.ndarray:
    """Process 0's int64 array on every process (multi-host); the array itself on one host."""
    values = np.asarray(values, dtype=np.int64)
    if jax.process_count() == 1:
        return values
    from jax.experimental import multihost_utils

    return np.asarray(multihost_utils.broadcast_one_to_all(values))


def shared_mode(spec: SweepSpec, group: Group | None = None) -> Shared:
    """How ``group``'s program gets what settings share (``ppo_jax.sweep.program.Shared``), from the group's
    pretraining seed (None: the spec's first)."""
    if not spec.task.shared_fields:
        return Shared("none")
    seed = spec.pretrain_seed if group is None else group.pretrain_seed
    return Shared("per_setting" if spec.pretrain_per_setting else "once", seed)


def describe_group(group: Group, spec: SweepSpec) -> str:
    models = {"pretrain_seed": group.pretrain_seed} if len(spec.pretrain_seeds) > 1 else {}
    return ", ".join(f"{k}={v}" for k, v in {"env": spec.task.env_of(group.cfg), **group.static, **models}.items())


def group_program(sweep_plan: SweepPlan, group: Group, mesh, log: Callable) -> Program:
    """The group's compiled program for its chunk size on ``mesh`` (compiled now if the plan has none; shared by
    the groups of one static key from other pretraining seeds, ``Group.program``)."""
    size = round_up(sweep_plan.chunk_sizes[group.index], mesh.size)  # a plan made on fewer devices: pad further
    program = sweep_plan.programs.get(group.program)
    if program is None or program.size != size:
        spec = sweep_plan.spec
        program = compile_program(spec.task, group.cfg, size, mesh, spec.log_every, shared_mode(spec, group))
        sweep_plan.programs[group.program] = program
        log(
            f"group {group.index} ({describe_group(group, sweep_plan.spec)}): compiled for {size} pairs in "
            f"{program.compile_seconds:.1f} s, ~{format_bytes(program.memory)}/device"
        )
        if program.memory > sweep_plan.budget:
            log(
                f"warning: that is over the memory budget of {format_bytes(sweep_plan.budget)}; use a smaller --chunk-size"
            )
    return program


def _shared(sweep_plan: SweepPlan, group: Group, log: Callable, shared: dict) -> tuple[object, float, dict]:
    """What the group's pairs share (computed on first use, then kept in ``shared``; a group whose pretraining is an
    earlier group's, by ``shared_fingerprint``, takes that one), the seconds it took now, and ``Task.describe_shared``
    of it when computed now (the SFT model's steps, loss and pass@k curve; else {})."""
    if group.index in shared:
        return shared[group.index], 0.0, {}
    how = shared_mode(sweep_plan.spec, group)
    start = time.perf_counter()
    if how.mode == "once":  # another group's pretraining may be this one: the same program on the same inputs
        fingerprint = shared_fingerprint(sweep_plan.spec.task, group.cfg, how.seed)
        if fingerprint in shared:
            source, shared[group.index] = shared[fingerprint]
            log(f"group {group.index}: the shared pretraining (seed {how.seed}) of group {source}, reused")
            return shared[group.index], 0.0, {}
    shared[group.index] = prepare_shared_once(sweep_plan.spec.task, group.cfg, how)
    if how.mode == "once":
        shared[fingerprint] = (group.index, shared[group.index])
    seconds = time.perf_counter() - start
    described = {}
    if how.mode == "once":
        described = sweep_plan.spec.task.describe_shared(group.cfg, shared[group.index])
        details = ", ".join(f"{k} {v:.3f}" for k, v in described.items())
        log(
            f"group {group.index}: shared pretraining (seed {how.seed}) in {seconds:.1f} s"
            + (f" ({details})" if details else "")
        )
    return shared[group.index], seconds, described


def _checkpoint_dir(out: Path, chunk: Chunk) -> Path:
    return out / CHECKPOINT_DIR / chunk.chunk_id


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

    ``checkpointing = (checkpoint_every, out)``: run it in segments, checkpointed into ``out/checkpoints/<chunk>``
    (``ppo_jax.sweep.segmented``; its programs compile on first use, inside run_seconds).
    """
    task, group = sweep_plan.spec.task, sweep_plan.groups[chunk.group]
    shared_values, pretrain_seconds, described = _shared(sweep_plan, group, log, shared)
    cfgs, seeds = [sweep_plan.spec.settings[i].cfg for i, _ in chunk.pairs], [seed for _, seed in chunk.pairs]
    start = time.perf_counter()
    if checkpointing is None:
        program = group_program(sweep_plan, group, mesh, log)
        compile_seconds = 0.0 if id(program) in charged else program.compile_seconds
        charged.add(id(program))
        size, memory = program.size, program.memory
        start = time.perf_counter()
        metrics = run_program(program, task, cfgs, seeds, mesh, shared_values)
    else:
        every, out = checkpointing
        size = round_up(sweep_plan.chunk_sizes[group.index], mesh.size)
        compile_seconds, memory = (
            0.0,
            sweep_plan.programs[group.program].memory if group.program in sweep_plan.programs else None,
        )
        interval = checkpoint_interval(every, task.num_updates(group.cfg))
        metrics = run_chunk_in_segments(
            task,
            cfgs,
            seeds,
            size,
            mesh,
            shared_values,
            shared_mode(sweep_plan.spec, group),
            log_every=sweep_plan.spec.log_every,
            interval=interval,
            directory=_checkpoint_dir(out, chunk),
            root=out,
        )
    run_seconds = time.perf_counter() - start
    env_steps = sum(task.num_updates(c) * task.steps_per_update(c) for c in cfgs)
    info = {
        "chunk": chunk.chunk_id,
        "pairs": len(chunk.pairs),
        "padded_pairs": size - len(chunk.pairs),
        "compile_seconds": compile_seconds,
        "pretrain_seconds": pretrain_seconds,
        **({"pretrain": {"pretrain_seed": group.pretrain_seed, **described}} if described else {}),
        "run_seconds": run_seconds,
        "env_steps": env_steps,
        "env_steps_per_second": env_steps / run_seconds,
        "unit": task.sample_unit,
        "memory_bytes": memory,
        "segmented": checkpointing is not None,
        "devices": mesh.size,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        **dict(
            zip(("git_commit", "git_dirty"), git_state(), strict=True)
        ),  # each part's own tree, not just the first's
        "finished": now_iso(),
    }
    return chunk_frame(sweep_plan.spec, chunk, metrics, group.pretrain_seed), info


def release_programs(sweep_plan: SweepPlan, program: int) -> None:
    """Free a program's compiled code (``Group.program``) once the last chunk that runs it has.

    Each program holds its machine code in memory; a sweep of many groups of large programs (Brax
    physics: 18 groups of ~1 GB of LLVM code and mappings) ran out of memory holding all of them.
    A later need recompiles, from the persistent compilation cache.
    """
    sweep_plan.programs.pop(program, None)
    programs_cache_clear()  # the segmented path's (--checkpoint-every) jitted functions
    jax.clear_caches()  # and every jit's compiled executables


def chunk_rows(sweep_plan: SweepPlan, chunk: Chunk) -> int:
    """Rows of a chunk's table: its pairs x the logged updates of its group."""
    task, cfg = sweep_plan.spec.task, sweep_plan.groups[chunk.group].cfg
    return len(chunk.pairs) * len(log_updates(task.num_updates(cfg), sweep_plan.spec.log_every))


def _claim(claims: Claims | None, out: Path, chunk: Chunk, lead: bool) -> str | None:
    """None when this sweep's processes run ``chunk`` (process 0 claimed it), else why not."""
    why = claims.claim(chunk.chunk_id, sweep_dir.chunk_path(out, chunk.chunk_id).exists) if lead else None
    return (why or "process 0 skips it") if from_process_0([why is not None])[0] else None


def _write(out: Path, chunk: Chunk, frame: pd.DataFrame, info: dict, checkpointed: bool) -> None:
    """The chunk's file and log line; its checkpoints go once the file is in place."""
    sweep_dir.write_chunk(out, chunk.chunk_id, frame, info)
    if checkpointed:
        shutil.rmtree(_checkpoint_dir(out, chunk), ignore_errors=True)
        with contextlib.suppress(OSError):  # the last chunk's: no checkpoints left
            _checkpoint_dir(out, chunk).parent.rmdir()
    sweep_dir.append_log(out, sweep_dir.log_line(info))


def execute(
    sweep_plan: SweepPlan,
    out: Path | None,
    part,
    *,
    progress: bool,
    log: Callable,
    warn: Callable,
    checkpoint_every=None,
    claims: Claims | None = None,
) -> pd.DataFrame:
    """Run the chunks of ``part`` not done in ``out`` (every chunk, in memory, when ``out`` is None); return the table.

    ``claims``: process 0's, with ``part`` (other processes follow its decisions). ``warn``: corrupt files moved aside.
    """
    sizes = [int(s) for s in from_process_0(sweep_plan.chunk_sizes)]
    sweep_plan = sweep_plan._replace(chunk_sizes=sizes, chunks=make_chunks(sweep_plan.groups, sizes))
    lead = jax.process_index() == 0
    mine = [sweep_plan.chunks[i] for i in part_slice(len(sweep_plan.chunks), part)]
    rows = {c.chunk_id: chunk_rows(sweep_plan, c) for c in sweep_plan.chunks}
    done = sweep_dir.intact_chunks(out, rows, warn) if out is not None and lead else set()
    pending_mask = from_process_0([c.chunk_id not in done for c in mine])
    pending = [c for c, todo in zip(mine, pending_mask, strict=True) if todo]
    if out is not None and len(pending) < len(mine):
        log(f"resuming {out}: {len(mine) - len(pending)} of {len(mine)} chunks already done")
    mesh, frames, charged, shared = device_mesh(), {}, set(), {}
    with ChunkProgress(len(pending), enabled=progress) as bar:
        for index, chunk in enumerate(pending):
            note = ""
            why = _claim(claims, out, chunk, lead) if part is not None else None
            if why is not None:
                log(f"chunk {chunk.chunk_id}: skipped, {why}")
            else:
                checkpointing = None if checkpoint_every is None else (checkpoint_every, out)
                try:
                    frame, info = _run_chunk(sweep_plan, chunk, mesh, log, charged, shared, checkpointing)
                    if out is None:
                        frames[chunk.chunk_id] = frame
                    elif lead:
                        _write(out, chunk, frame, info, checkpointing is not None)
                finally:
                    if claims is not None:
                        claims.release(chunk.chunk_id)
                log(sweep_dir.log_line(info))
                note = f"{info['env_steps_per_second']:,.0f} {info['unit']}/s"
            later = [sweep_plan.groups[c.group] for c in pending[index + 1 :]]
            if not any(g.index == chunk.group for g in later):
                shared.pop(chunk.group, None)  # its pretrained model
            if not any(g.program == sweep_plan.groups[chunk.group].program for g in later):
                release_programs(sweep_plan, sweep_plan.groups[chunk.group].program)
            bar.update(note)
    if out is None:
        return sort_table(sweep_plan.spec, pd.concat(frames.values(), ignore_index=True))
    if not lead:
        return pd.DataFrame()
    done = sweep_dir.done_chunks(out)
    ids = [c.chunk_id for c in sweep_plan.chunks if c.chunk_id in done]
    table = sort_table(sweep_plan.spec, sweep_dir.read_chunks(out, ids))
    if len(ids) == len(sweep_plan.chunks):
        if pending or not sweep_dir.results_intact(out, len(table), warn):
            sweep_dir.finish(out, table, summarize(sweep_plan.spec, table), sweep_dir.final_metadata(out, ids))
    else:
        log(f"{len(ids)} of {len(sweep_plan.chunks)} chunks done in {out}; the table is merged when all are")
    return table
