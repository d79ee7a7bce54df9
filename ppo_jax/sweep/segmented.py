"""A sweep chunk run in segments and checkpointed (``ppo-jax sweep --checkpoint-every``): a kill loses one segment, not the chunk.

The chunk's pairs go through three programs, each ``vmap`` over the pairs with the
pair axis sharded over the devices (as in ``ppo_jax.sweep.program``):
``init`` (the training state of every pair), ``advance`` (``length`` updates, the
metrics windowed to ``log_every`` inside jit; ``length`` is a multiple of it, so
windows do not straddle segments) and ``finish`` (each run's evaluation). After
every segment the state and the windowed metrics so far are
checkpointed to ``DIR/checkpoints/<chunk>/`` (``ppo_jax.storage.checkpoints``);
a resumed sweep continues the chunk from there, and the chunk's table is what
the uninterrupted segmented chunk gives, bit for bit (and the one-program chunk
to float32 rounding). The directory goes when the chunk's file is written.
"""

from __future__ import annotations

import functools
import math
import warnings
from pathlib import Path

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from ppo_jax.scan_updates import scan_updates
from ppo_jax.storage.checkpoints import Checkpoints, NoCheckpoint
from ppo_jax.sweep.program import Shared, log_updates, stack_pairs, window_metrics
from ppo_jax.task_contract import Task
from ppo_jax.vmap_runs import vmap_runs


def segment_length(interval: int, log_every: int, num_updates: int) -> int:
    """Updates per segment: the checkpoint interval rounded up to a multiple of ``log_every``, at most the run."""
    return min(math.ceil(interval / log_every) * log_every, math.ceil(num_updates / log_every) * log_every)


def _pair_init(cfg, key_data, shared, *, task: Task, how: Shared):
    if how.mode == "per_setting":
        shared = task.prepare_shared(cfg, jax.random.key(how.seed))
        return task.init(cfg, jax.random.wrap_key_data(key_data), shared), shared
    return task.init(cfg, jax.random.wrap_key_data(key_data), shared)


def _pair_advance(cfg, state, first, shared, *, task: Task, how: Shared, length: int, log_every: int):
    carry, own = state if how.mode == "per_setting" else (state, shared)
    num_updates = task.num_updates(cfg)
    carry, metrics = scan_updates(
        lambda c, u: task.step(cfg, c, u, own),
        carry,
        first,
        length,
        num_updates=num_updates,
        masked=num_updates % length != 0,
        checked=task.checked_state,
    )
    metrics = window_metrics({name: metrics[name] for name in task.metric_names}, log_every, task.summed_metrics)
    return ((carry, own) if how.mode == "per_setting" else carry), metrics


def _pair_finish(cfg, state, key_data, shared, *, task: Task, how: Shared):
    carry, own = state if how.mode == "per_setting" else (state, shared)
    return task.evaluate(cfg, task.finish(cfg, carry, {}), jax.random.wrap_key_data(key_data), own)


@functools.cache
def _programs(task: Task, mesh: Mesh, how: Shared, length: int, log_every: int):
    pairs, replicated = NamedSharding(mesh, PartitionSpec("pairs")), NamedSharding(mesh, PartitionSpec())
    init = jax.jit(
        vmap_runs(functools.partial(_pair_init, task=task, how=how), in_axes=(0, 0, None)),
        in_shardings=(pairs, pairs, replicated),
        out_shardings=pairs,
    )
    advance = jax.jit(
        vmap_runs(
            functools.partial(_pair_advance, task=task, how=how, length=length, log_every=log_every),
            in_axes=(0, 0, None, None),
        ),
        in_shardings=(pairs, pairs, replicated, replicated),
        out_shardings=pairs,
    )
    finish = jax.jit(
        vmap_runs(functools.partial(_pair_finish, task=task, how=how), in_axes=(0, 0, 0, None)),
        in_shardings=(pairs, pairs, pairs, replicated),
        out_shardings=pairs,
    )
    return init, advance, finish


def programs_cache_clear() -> None:
    """Forget the jitted functions of every group (``ppo_jax.sweep.execute.release_programs``)."""
    _programs.cache_clear()


def run_chunk_in_segments(
    task: Task,
    cfgs: list,
    seeds: list[int],
    size: int,
    mesh: Mesh,
    shared,
    how: Shared,
    *,
    log_every: int,
    interval: int,
    directory: Path,
    root: Path | None = None,
    keep: int = 2,
) -> dict[str, np.ndarray]:
    """Run one chunk as segments, checkpointing after each (``interval`` updates) into ``directory``, resumed from it if there.

    The caller removes ``directory`` once the chunk's table is written. Unreadable checkpoints go to
    ``root/corrupt/`` (the sweep directory's; ``Checkpoints``); with none readable the chunk starts over.

    Returns what ``ppo_jax.sweep.program.run_program`` returns: ``metrics[name]`` ``float32[len(cfgs), num_logs]``,
    and ``[len(cfgs)]`` for ``task.eval_names``.
    """
    if jax.process_count() > 1:
        from ppo_jax.errors import SpecError

        raise SpecError("--checkpoint-every is for single-process sweeps; a multi-host sweep resumes chunk by chunk.")
    num_updates = task.num_updates(cfgs[0])
    length = segment_length(interval, log_every, num_updates)
    init, advance, finish = _programs(task, mesh, how, length, log_every)
    stacked, keys = stack_pairs(cfgs, seeds, size)
    num_logs = len(log_updates(num_updates, log_every))
    table = {name: np.full((size, num_logs), np.nan, np.float32) for name in task.metric_names}
    state = init(stacked, keys, shared)
    checkpoints = Checkpoints(directory, keep, root)
    try:  # a stop (KeyboardInterrupt, SIGTERM) still completes the checkpoint being written
        first = 0
        if checkpoints.updates():
            try:
                (state, table), meta = checkpoints.restore(like=(state, table))
                table, first = {name: np.array(values) for name, values in table.items()}, int(meta["update"])
            except NoCheckpoint:
                warnings.warn(f"no readable checkpoint in {directory}: running the chunk from its start", stacklevel=2)
        for start in range(first, num_updates, length):
            state, metrics = advance(stacked, state, np.int32(start), shared)
            metrics = jax.device_get(metrics)
            begin, end = start // log_every, min(num_logs, math.ceil((start + length) / log_every))
            for name in task.metric_names:
                table[name][:, begin:end] = np.asarray(metrics[name])[:, : end - begin]
            if start + length < num_updates:
                checkpoints.save(start + length, (state, table), {})
        evaluation = jax.device_get(finish(stacked, state, keys, shared))
    finally:
        checkpoints.close()
    out = {**table, **{name: np.asarray(evaluation[name]) for name in task.eval_names}}
    return {name: values[: len(cfgs)] for name, values in out.items()}
