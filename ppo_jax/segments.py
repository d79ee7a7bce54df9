"""A run as a host loop over compiled segments of ``length`` updates: one compile, reused by every segment.

    segments = compile_segments(task, cfg, keys, shared, length=50)
    carry = segments.init(cfg, keys, shared)                       # every leaf [num_runs, ...]
    for first in range(0, segments.num_updates, segments.length):
        carry, metrics = segments.advance(cfg, carry, first, shared)   # metrics[name]: [num_runs, n]
        ...                                                        # write them, checkpoint carry
    output = task.finish(cfg, carry, {})

Between two segments the whole training state (``carry``) is on the host side of
the program, so it can be written (``ppo_jax.storage.checkpoints``) and a run
continued from it gives what the uninterrupted run gives: the same compiled
segment program on the same state. The metrics of a segment leave the device
when it ends, so device and host memory do not grow with the number of updates.

A run of ``num_updates`` that ``length`` does not divide ends with a shorter
segment: the same program, whose scan skips updates past the end (``masked`` in
``ppo_jax.scan_updates.scan_updates``); a run of one segment is ``Task.train``'s program.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ppo_jax.errors import ConfigError
from ppo_jax.scan_updates import scan_updates
from ppo_jax.task_contract import Task
from ppo_jax.vmap_runs import vmap_runs

MAX_SEGMENT_METRICS_BYTES = 64 * 2**20
"""Cap on one segment's metrics (float32, all runs): bounds the memory a long run uses on the device and host."""


def checkpoint_interval(value: str | None, num_updates: int) -> int | None:
    """``--checkpoint-every``: "5%" of the updates or a number of updates -> updates (at least 1); None: no periodic checkpoints."""
    if value is None:
        return None
    text = str(value).strip()
    match = re.fullmatch(r"(\d+(?:\.\d*)?)\s*%", text)
    if match and 0 < float(match.group(1)) <= 100:
        return max(1, math.ceil(float(match.group(1)) / 100 * num_updates))
    if text.isdigit() and int(text) > 0:
        return int(text)
    raise ConfigError(
        f"--checkpoint-every {value!r}: give a percentage of the updates (e.g. 5%) or a number of updates (e.g. 100)."
    )


def segment_length(num_updates: int, requested: int | None, *, num_runs: int, num_metrics: int) -> int:
    """Updates per segment: ``requested`` (default: the whole run), at most the run and the metrics cap."""
    cap = max(1, MAX_SEGMENT_METRICS_BYTES // (4 * num_runs * max(1, num_metrics)))
    return max(1, min(num_updates if requested is None else requested, cap, num_updates))


class Segments(NamedTuple):
    """The compiled programs of a segmented run of ``num_updates`` updates, ``length`` per segment.

    ``chunk_size``: the runs ``advance_program`` takes per call (0: all of them), so that a chunk's working set
    can stay in a CPU's caches where all runs' does not (``ppo_jax.seed_chunks``). Each run is the run a
    program of ``chunk_size`` runs gives it, bit for bit; all runs in one call can differ from that at float32
    rounding (XLA:CPU appears to round some reductions differently by batch size).
    """

    init_program: jax.stages.Compiled  # (cfg, keys, shared) -> carry
    advance_program: jax.stages.Compiled  # (cfg, carry, first, shared) -> (carry, metrics)
    length: int
    num_updates: int
    compile_seconds: float
    chunk_size: int = 0

    def init(self, cfg, keys, shared):
        """The runs' training state before update 0 (every leaf with a leading run axis)."""
        return self.init_program(cfg, keys, shared)

    def advance(self, cfg, carry, first: int, shared) -> tuple[object, dict[str, np.ndarray]]:
        """Updates ``first ..`` of one segment: the new carry and ``metrics[name]``, ``[num_runs, n]`` numpy (n <= length)."""
        carry, metrics = self.dispatch(cfg, carry, first, shared)
        return carry, self.fetch(metrics, first)

    def dispatch(self, cfg, carry, first: int, shared):
        """``advance`` without waiting: the new carry and the metrics on the device (``fetch`` them)."""
        num_runs, size = jax.tree.leaves(carry)[0].shape[0], self.chunk_size
        if not size or size == num_runs:
            return self.advance_program(cfg, carry, jnp.int32(first), shared)
        groups = [
            self.advance_program(cfg, _runs(carry, start, start + size), jnp.int32(first), shared)
            for start in range(0, num_runs, size)
        ]
        return jax.tree.map(lambda *parts: jnp.concatenate(parts), *groups)

    def fetch(self, metrics, first: int) -> dict[str, np.ndarray]:
        """The metrics of the segment from ``first`` on the host, ``[num_runs, n]``, updates past the run's end dropped."""
        count = min(self.length, self.num_updates - first)
        return {name: np.asarray(values)[:, :count] for name, values in jax.device_get(metrics).items()}

    def starts(self, first: int = 0) -> range:
        """The first update of each segment from ``first`` (a segment boundary) on."""
        return range(first, self.num_updates, self.length)


def _runs(tree, start: int, stop: int):
    """Runs ``start:stop`` of every leaf (the leading axis is the run's)."""
    return jax.tree.map(lambda x: x[start:stop], tree)


def compile_segments(
    task: Task,
    cfg,
    keys,
    shared,
    length: int,
    *,
    on_update: Callable | None = None,
    report_every: int = 1,
    chunk_size: int = 0,
) -> Segments:
    """Compile ``init`` and one segment of ``length`` updates, vmapped over the runs' ``keys`` (``cfg`` and ``shared`` shared).

    ``chunk_size`` (a divisor of the number of runs; 0: all): the segment program takes that many runs a call."""
    num_updates = task.num_updates(cfg)
    masked = num_updates % length != 0

    def advance(cfg, carry, first, shared):
        return scan_updates(
            lambda c, u: task.step(cfg, c, u, shared),
            carry,
            first,
            length,
            num_updates=num_updates,
            masked=masked,
            on_update=on_update,
            report_every=report_every,
            checked=task.checked_state,
        )

    start = time.perf_counter()
    init = jax.jit(vmap_runs(task.init, in_axes=(None, 0, None)))
    carry = jax.eval_shape(init, cfg, keys, shared)
    init_program = init.lower(cfg, keys, shared).compile()
    # The carry stays where init puts it: one device, or the task's shardings on a mesh (``Task.place``).
    placed = init_program.output_shardings
    advance_program = jax.jit(vmap_runs(advance, in_axes=(None, 0, None, None)), out_shardings=(placed, None))
    if chunk_size and len(keys) % chunk_size:
        raise ValueError(f"chunk_size {chunk_size} does not divide the {len(keys)} runs")
    carry = jax.tree.map(
        lambda x, where: jax.ShapeDtypeStruct((chunk_size or x.shape[0], *x.shape[1:]), x.dtype, sharding=where),
        carry,
        placed,
    )
    advance_program = advance_program.lower(cfg, carry, jnp.int32(0), shared).compile()
    return Segments(init_program, advance_program, length, num_updates, time.perf_counter() - start, chunk_size)
