"""``--chunk-size auto``: each shape's chunk size by measured throughput, within the memory bound.

The largest chunk that fits memory is not always the fastest: on a 2-core CPU, 64 Pendulum pairs with
256 x 256 networks in one program ran at 0.88-0.93 of the throughput of four chunks of 16 (docs/benchmarks/chunking.md,
"Chunk size"; this calibration, in the probe order below, ended at 0.95-0.99 of them, calibration included). For
the first group of each shape (``ppo_jax.sweep.plan.shape_key``) the candidates are the memory-fit size
and its balanced halves (at most ``MAX_CANDIDATES``, none below 2 pairs: one pair runs unbatched, a
different program). Each is probed on the group's own first pairs: its segment program
(``ppo_jax.sweep.segmented``, one update per segment) is compiled ahead of time, then run update by update
until ``PROBE_SECONDS`` have passed (at least one update); the probe's results are thrown away, so every
run of the sweep is the run a fixed ``--chunk-size`` of the chosen value gives. Throughput is pair-updates
per second (env steps per second up to the steps per update, which a shape's groups share).

A smaller size wins only when more than ``MARGIN`` faster than the memory-fit one.

Opt-in, not the default: another chunk size can change a run's numbers at float32 rounding (XLA:CPU appears
to round some reductions differently by batch size; ``scripts/chunk_rounding.py``), so a size chosen by timing would let
one command give different numbers on one machine. The choice is recorded, and a fixed ``--chunk-size`` of it
gives the sweep again, bit for bit.

Probe order (``probe_order``): the memory fit, then the smallest candidate, then the ones between only if the
two ends were level (within ``MARGIN``). A probe costs a compile and at least one update of its pairs, and throughput tends to move
one way with chunk size on a device (on a CPU it falls once a chunk's working set leaves the caches; on an
accelerator it rises until the device is busy), so the two ends decide unless they are level, when a peak
between them would be missed. On the 2-core CPU's Pendulum case the ends were 43% apart: two probes, not three.

Which shapes are probed (``skip_reason``, decided before any probe): only in a single-process sweep on a
CPU, and only when the shape's groups train at least ``MIN_PROBE_SAMPLES`` env steps (samples) in all. On an
accelerator throughput rises with chunk size until the device is busy, so the memory fit is at or near the
fastest and a probe would only add a compile (a reasoned rule, not measured: no GPU was lent). Below the floor
an RL sweep runs under the 10-minute threshold on every case measured on the 2-core CPU (the slowest, GRU runs,
about 3,200 env steps/s: 10^6 in about 5 minutes; docs/benchmarks/), so the test suite and small sweeps pay
nothing for auto. An LM sample is a sequence, far costlier: an LM shape under the floor can run longer, and is
then not probed either.

Cost bound: the memory-fit size is probed first; its rate gives the estimated run time of the shape's
groups. Under ``MIN_SWEEP_SECONDS`` the calibration stops there (the memory-fit size is kept); otherwise
the next candidate is probed only while the seconds spent plus that probe's predicted cost (the last
compile, and the last update's time scaled to the next size, at least ``PROBE_SECONDS``) stay within
``SHARE`` of that estimate (taken at the fastest rate so far). A probe costs its compile and about one
update of its pairs, so the share is small for runs of hundreds of updates and a sweep of a few dozen
updates per run stops early. Every candidate, its rate (None: not probed) and the choice go into plan.json
and metadata.json.
"""

from __future__ import annotations

import time
from typing import NamedTuple

import jax
import numpy as np

from ppo_jax.sweep.plan import Group, balanced_chunk_size
from ppo_jax.sweep.program import Shared, prepare_shared_once, stack_pairs
from ppo_jax.sweep.segmented import _programs
from ppo_jax.sweep.spec import SweepSpec

MAX_CANDIDATES = 3
MIN_PROBE_SAMPLES = 10**6
"""Shapes whose groups train fewer env steps (samples) than this are not probed: the memory fit is kept."""
PROBE_SECONDS = 0.5
MIN_SWEEP_SECONDS = 600.0
SHARE = 0.05
MARGIN = 0.05
"""A smaller chunk is chosen only if it is this much faster than the memory-fit one (else timing noise would
split level shapes into more chunks for nothing)."""


class Calibration(NamedTuple):
    """A shape's calibration: the candidate sizes, their measured pair-updates per second (None: not probed),
    the chosen size, the seconds it all took (compiles included) and why it stopped."""

    candidates: list[int]
    rates: list[float | None]
    chosen: int
    seconds: float
    note: str

    def to_dict(self) -> dict:
        return self._asdict()


def candidates(fit: int, num_pairs: int, devices: int) -> list[int]:
    """The memory-fit size, then balanced halves (``plan.balanced_chunk_size``) down to 2 pairs per device."""
    sizes = [fit]
    while len(sizes) < MAX_CANDIDATES:
        smaller = balanced_chunk_size(num_pairs, sizes[-1] // 2, devices)
        if smaller >= sizes[-1] or smaller < 2 * devices:
            break
        sizes.append(smaller)
    return sizes


def probe_order(num_candidates: int) -> list[int]:
    """Indices into ``candidates``: the memory fit, the smallest, then the ones between (largest first)."""
    if num_candidates <= 2:
        return list(range(num_candidates))
    return [0, num_candidates - 1, *range(1, num_candidates - 1)]


class Probe(NamedTuple):
    """One candidate's probe: pair-updates per second, seconds it took in all, of which compiling."""

    rate: float
    seconds: float
    compile_seconds: float

    def predicted_cost(self, next_size: int) -> float:
        """Seconds a probe of ``next_size`` pairs should take: this compile, and one update at this rate."""
        return self.compile_seconds + max(PROBE_SECONDS, next_size / self.rate)


def probe(spec: SweepSpec, group: Group, size: int, mesh, how: Shared) -> Probe:
    """Time ``size`` of the group's first pairs, update by update, for ``PROBE_SECONDS`` (at least one update)."""
    start = time.perf_counter()
    task, log_every = spec.task, spec.log_every
    pairs = group.pairs[:size]
    cfgs, seeds = [spec.settings[i].cfg for i, _ in pairs], [seed for _, seed in pairs]
    shared = prepare_shared_once(task, group.cfg, how)
    init, advance, _ = _programs(task, mesh, how, log_every, log_every)
    stacked, keys = stack_pairs(cfgs, seeds, size)
    state = init(stacked, keys, shared)
    advance = advance.lower(stacked, state, np.int32(0), shared).compile()  # ahead of time: no warm-up update
    compile_seconds = time.perf_counter() - start
    step = lambda state, first: advance(stacked, state, np.int32(first), shared)  # noqa: E731
    updates, timed = time_updates(step, state, task.num_updates(group.cfg), log_every)
    return Probe(size * updates / timed, time.perf_counter() - start, compile_seconds)


def time_updates(step, state, num_updates: int, per_call: int) -> tuple[int, float]:
    """Call ``step(state, first) -> (state, metrics)`` (``per_call`` updates each) until ``PROBE_SECONDS`` have
    passed (at least once) or the run ends; the updates done and the seconds they took."""
    timed, updates, first = 0.0, 0, 0
    while (timed < PROBE_SECONDS or not updates) and first < num_updates:
        begin = time.perf_counter()
        state, metrics = step(state, first)
        jax.block_until_ready(metrics)
        timed += time.perf_counter() - begin
        updates += min(per_call, num_updates - first)
        first += per_call
    return updates, timed


def samples_of(spec: SweepSpec, groups: list[Group]) -> int:
    """Env steps (samples) the groups' pairs train in all."""
    task = spec.task
    return sum(
        task.num_updates(spec.settings[i].cfg) * task.steps_per_update(spec.settings[i].cfg)
        for g in groups
        for i, _ in g.pairs
    )


def skip_reason(samples: int, platform: str, processes: int = 1) -> str | None:
    """Why a shape whose groups train ``samples`` env steps in all on ``platform`` is not probed (None: it is).

    A multi-process sweep is not probed: each process would time the probes on its own clock and could stop
    at another candidate than the others, leaving them waiting in a collective program."""
    if processes > 1:
        return f"not probed in a sweep of {processes} processes"
    if platform != "cpu":
        return f"not probed on {platform}: throughput rises with chunk size until the device is busy"
    if samples < MIN_PROBE_SAMPLES:
        return f"not probed: {samples:,} samples, under {MIN_PROBE_SAMPLES:,}"
    return None


def calibrate(spec: SweepSpec, shape_groups: list[Group], fit: int, mesh, how: Shared, log) -> Calibration:
    """The chunk size for the groups of one shape (all sized ``fit`` by memory), probed on the first of them."""
    group, task = shape_groups[0], spec.task
    sizes = candidates(fit, len(group.pairs), mesh.size)
    if len(sizes) == 1:
        return Calibration(sizes, [None], fit, 0.0, "one candidate (no smaller balanced chunk of 2 or more pairs)")
    why = skip_reason(samples_of(spec, shape_groups), mesh.devices.flat[0].platform, jax.process_count())
    if why is not None:
        return Calibration(sizes, [None] * len(sizes), fit, 0.0, why)
    log(f"group {group.index}: calibrating the chunk size of {len(shape_groups)} group(s) of its shape by probes")
    work = sum(len(g.pairs) * task.num_updates(g.cfg) for g in shape_groups)
    return choose(sizes, lambda size: probe(spec, group, size, mesh, how), work, log)


def choose(sizes: list[int], measure, work: int, log, what: str = "pairs per chunk") -> Calibration:
    """Probe ``sizes`` (the largest first) in ``probe_order`` within the cost bound; the fastest, unless level.

    ``measure(size) -> Probe``; ``work``: the pair-updates (run-updates) the sizes are chosen for."""
    rates: list[float | None] = [None] * len(sizes)
    spent, note = 0.0, "every candidate probed"
    order = probe_order(len(sizes))
    for step, i in enumerate(order):
        size = sizes[i]
        measured = measure(size)
        rates[i], spent = measured.rate, spent + measured.seconds
        log(f"  calibration: {size} {what}, {measured.rate:,.1f} run-updates/s (probe {measured.seconds:.1f} s)")
        if step + 1 == len(order):
            break  # every candidate probed: the bounds below only decide whether to probe another
        if step == 1 and abs(rates[i] - rates[0]) > MARGIN * rates[0]:
            faster = "faster" if rates[i] > rates[0] else "slower"
            note = f"the smallest candidate is {faster} than the largest: the ones between not probed"
            break
        estimate = work / max(r for r in rates if r is not None)
        if estimate < MIN_SWEEP_SECONDS:
            note = f"stopped: these groups run about {estimate:.0f} s, under {MIN_SWEEP_SECONDS:.0f} s"
            break
        if spent + measured.predicted_cost(sizes[order[step + 1]]) > SHARE * estimate:
            note = f"stopped: another probe would pass {SHARE:.0%} of the estimated {estimate:.0f} s"
            break
    fastest = max((r, s) for r, s in zip(rates, sizes, strict=True) if r is not None)
    chosen = fastest[1] if fastest[0] > (1 + MARGIN) * rates[0] else sizes[0]  # level within noise: fewer chunks
    return Calibration(sizes, rates, chosen, spent, note)
