"""One compiled program per group: ``vmap(task.train)`` over (setting, seed) pairs, sharded over devices.

The pair axis of the stacked config (every traced leaf ``[n]``) and of the keys
(``uint32[n, 2]``, the data of ``jax.random.key(seed)``) is sharded over a 1-D
``Mesh`` of all devices (``NamedSharding(mesh, P("pairs"))``); ``n`` is a
multiple of the device count (chunks are padded by repeating their last pair,
and the padding is dropped afterwards). Under ``jax.distributed`` the mesh spans
every host and each host supplies its shard from the same host-side arrays.
Only per-update metrics leave the program, reduced to windows of ``log_every``
updates inside jit, and each run's evaluation (``Task.evaluate``; PPO: mean return
of the final parameters over fresh episodes with the stochastic and the
deterministic policy).

What the settings of a task share (``Task.prepare_shared``: RLHF's pretrained
models) enters the program as a replicated argument, computed once per group
(``prepare_shared_once``); with ``per_setting`` each pair prepares its own inside
the program instead, from the same pretrain key.
"""

from __future__ import annotations

import functools
import os
import time
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from ppo_jax.errors import SpecError
from ppo_jax.sweep.plan import balanced_chunk_size, format_bytes, round_up
from ppo_jax.task_contract import Task
from ppo_jax.vmap_runs import vmap_runs


class Shared(NamedTuple):
    """How a program gets what its settings share: ``mode`` "none", "once" (an argument) or "per_setting"."""

    mode: str
    seed: int = 0  # the pretrain key is jax.random.key(seed)


class Program(NamedTuple):
    """A compiled chunk program for ``size`` pairs; ``memory`` is XLA's estimate per device, in bytes."""

    compiled: jax.stages.Compiled
    size: int
    compile_seconds: float
    memory: int


def device_mesh() -> Mesh:
    """A 1-D mesh named ``pairs`` over every device of every process."""
    return Mesh(np.asarray(jax.devices()), ("pairs",))


def log_updates(num_updates: int, log_every: int) -> np.ndarray:
    """Index of the last update of each logging window: ``[ceil(num_updates / log_every)]``."""
    ends = np.arange(log_every, num_updates + log_every, log_every)
    return np.minimum(ends, num_updates) - 1


def window_metrics(metrics: dict[str, jax.Array], log_every: int, summed=()) -> dict[str, jax.Array]:
    """``[num_updates]`` metrics -> ``[num_logs]``: NaN-skipping mean over each window (sum for ``summed`` names)."""
    if log_every == 1:
        return metrics
    out = {}
    for name, values in metrics.items():
        num_logs = -(-values.shape[0] // log_every)
        padded = jnp.full((num_logs * log_every,), jnp.nan, values.dtype).at[: values.shape[0]].set(values)
        windows = padded.reshape(num_logs, log_every)
        out[name] = jnp.nansum(windows, axis=1) if name in summed else jnp.nanmean(windows, axis=1)
    return out


def pair_metrics(cfg, key_data: jax.Array, shared, *, task: Task, log_every: int, how: Shared) -> dict[str, jax.Array]:
    """One run: its metrics windowed (each ``[num_logs]``) and its evaluation (``task.eval_names``, each ``[]``)."""
    key = jax.random.wrap_key_data(key_data)
    if how.mode == "per_setting":
        shared = task.prepare_shared(cfg, jax.random.key(how.seed))
    output = task.train(cfg, key, shared)
    metrics = {name: output.metrics[name] for name in task.metric_names}
    return {**window_metrics(metrics, log_every, task.summed_metrics), **task.evaluate(cfg, output, key, shared)}


@functools.cache
def _jitted(fn):
    return jax.jit(fn)


def prepare_shared_once(task: Task, cfg, how: Shared):
    """What a group's pairs share, computed on the host before its program runs (None unless ``how.mode`` is "once").

    One jitted ``prepare_shared`` per engine per process, so a resumed sweep, the
    next group or the next sweep in the same process does not compile it again.
    """
    if how.mode != "once":
        return None
    return jax.device_get(_jitted(task.engine_module().prepare_shared)(cfg, jax.random.key(how.seed)))


def memory_bytes(compiled: jax.stages.Compiled) -> int:
    """Arguments + outputs + temporaries - aliased, per device (XLA's compiled memory analysis)."""
    stats = compiled.memory_analysis()
    if stats is None:
        return 0
    total = stats.argument_size_in_bytes + stats.output_size_in_bytes + stats.temp_size_in_bytes
    return int(max(total - stats.alias_size_in_bytes, getattr(stats, "peak_memory_in_bytes", 0) or 0))


def _abstract_shared(task: Task, cfg, how: Shared, mesh: Mesh):
    if how.mode != "once":
        return None
    replicated = NamedSharding(mesh, PartitionSpec())
    shapes = jax.eval_shape(task.prepare_shared, cfg, jax.random.key(how.seed))
    return jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=replicated), shapes)


def compile_program(task: Task, cfg, size: int, mesh: Mesh, log_every: int, how: Shared) -> Program:
    """Compile ``vmap(pair_metrics)`` for ``size`` pairs with ``cfg``'s static fields (size % devices == 0)."""
    sharding = NamedSharding(mesh, PartitionSpec("pairs"))
    abstract_cfg = jax.tree.map(lambda _: jax.ShapeDtypeStruct((size,), jnp.float32, sharding=sharding), cfg)
    abstract_keys = jax.ShapeDtypeStruct((size, 2), jnp.uint32, sharding=sharding)
    pair = functools.partial(pair_metrics, task=task, log_every=log_every, how=how)
    fn = jax.jit(vmap_runs(pair, in_axes=(0, 0, None)), out_shardings=sharding)
    start = time.perf_counter()
    compiled = fn.lower(abstract_cfg, abstract_keys, _abstract_shared(task, cfg, how, mesh)).compile()
    return Program(compiled, size, time.perf_counter() - start, memory_bytes(compiled))


def default_memory_budget() -> int:
    """Per-device budget: 90% of an accelerator's allocator limit; on CPU, half the RAM shared by the local devices."""
    device = jax.local_devices()[0]
    stats = device.memory_stats() if device.platform != "cpu" else None
    if stats and stats.get("bytes_limit"):
        return int(0.9 * stats["bytes_limit"])
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return int(0.5 * ram / jax.local_device_count())


def fit_program(task: Task, cfg, num_pairs: int, budget: int, mesh: Mesh, log_every: int, how: Shared) -> Program:
    """The program for the largest evenly chunked size of this group whose memory estimate fits ``budget``.

    Compiles for all ``num_pairs`` first (the program a run uses when it fits, so
    usually nothing is compiled twice). Over budget, it predicts the size that
    fits from the estimates so far (memory = fixed + per pair x pairs: from one
    estimate, per pair = estimate / pairs, which over-estimates; from two, the
    line through them) and recompiles at the balanced chunk size below that.
    """
    devices, seen = mesh.size, []
    size = round_up(num_pairs, devices)
    while True:
        program = compile_program(task, cfg, size, mesh, log_every, how)
        if program.memory <= budget:
            return program
        if size == devices:
            raise SpecError(
                f"{task.env_of(cfg)}: {size // devices} pair(s) per device need about {format_bytes(program.memory)} per "
                f"device, over the memory budget of {format_bytes(budget)}; raise --memory-budget or shrink the runs "
                f"({task.memory_hint})."
            )
        seen.append((size, program.memory))
        (n1, m1), (n0, m0) = seen[-1], seen[-2] if len(seen) > 1 else (0, 0)
        per_pair = (m1 - m0) / (n1 - n0) if len(seen) > 1 and m1 > m0 else m1 / n1
        fit = int((budget - (m1 - per_pair * n1)) / per_pair)
        size = balanced_chunk_size(num_pairs, min(fit, size - devices), devices)  # strictly smaller


def stack_pairs(cfgs: list, seeds: list[int], size: int) -> tuple[Any, np.ndarray]:
    """Stacked config (leaves ``float32[size]``) and key data ``uint32[size, 2]``, padded with the last pair."""
    pad = size - len(cfgs)
    cfgs, seeds = cfgs + cfgs[-1:] * pad, list(seeds) + list(seeds[-1:]) * pad
    stacked = jax.tree.map(lambda *leaves: np.stack(leaves).astype(np.float32), *cfgs)
    keys = np.stack([np.asarray(jax.random.key_data(jax.random.key(s))) for s in seeds]).astype(np.uint32)
    return stacked, keys


def run_program(
    program: Program, task: Task, cfgs: list, seeds: list[int], mesh: Mesh, shared=None
) -> dict[str, np.ndarray]:
    """Run one chunk: ``metrics[name]`` is ``float32[len(cfgs), num_logs]`` (``[len(cfgs)]`` for ``task.eval_names``)."""
    sharding = NamedSharding(mesh, PartitionSpec("pairs"))
    stacked, keys = stack_pairs(cfgs, seeds, program.size)

    def put(x):
        return jax.make_array_from_callback(x.shape, sharding, lambda index: x[index])

    replicated = NamedSharding(mesh, PartitionSpec())

    def put_replicated(x):
        x = np.asarray(x)
        return jax.make_array_from_callback(x.shape, replicated, lambda index: x[index])

    out = program.compiled(jax.tree.map(put, stacked), put(keys), jax.tree.map(put_replicated, shared))
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        out = multihost_utils.process_allgather(out, tiled=True)
    out = jax.device_get(jax.block_until_ready(out))
    return {name: np.asarray(out[name])[: len(cfgs)] for name in (*task.metric_names, *task.eval_names)}
