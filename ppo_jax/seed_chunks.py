"""``ppo-jax train --seeds N --chunk-size auto|K``: a run's seeds advanced a chunk at a time where that is faster.

All seeds of a run train as one vmapped program (``ppo_jax.segments``). On a CPU whose caches hold a few runs'
working set but not all of them, the segment program called on a chunk of the runs at a time can be faster
(a sweep of 64 Pendulum runs with 256 x 256 networks: chunks of 16 at 1.08-1.14x the throughput of all 64 in
one, docs/benchmarks/chunking.md). The rule is a sweep's ``--chunk-size auto``
(``ppo_jax.sweep.calibrate``): on a CPU, in one process, for a run of at least ``MIN_PROBE_SAMPLES`` samples
in all, the candidates -- all N seeds, then halves while they divide N, at least 2 (one run alone is another,
unbatched program) -- are probed in ``calibrate.probe_order`` within ``calibrate.SHARE`` of the estimated run
time, and a smaller chunk is chosen only when more than ``calibrate.MARGIN`` faster. A probe compiles a
segment program of one update for its chunk of the run's own first seeds, runs it for
``calibrate.PROBE_SECONDS`` (at least one update) and throws the result away. Each chunk of K >= 2 seeds is
those seeds run on their own, bit for bit (tests/test_seed_chunks.py); a chunk of one is not ``--seed s`` alone,
whose program is unbatched (the initial weights are computed batched over all N seeds either way). But the numbers can depend on how many share a call:
XLA:CPU appears to round some reductions differently by batch size, so another chunk size can change them at
float32 rounding (``scripts/chunk_rounding.py``). The size used is in metadata.json ("run", and with auto
"seed_chunks": candidates, rates, choice); ``--chunk-size`` of that size gives the run again, bit for bit. Not
the default for that reason: the same command would give numbers that depend on the machine's timing.
"""

from __future__ import annotations

import time

import jax

from ppo_jax.errors import ConfigError
from ppo_jax.segments import compile_segments
from ppo_jax.sweep import calibrate
from ppo_jax.task_contract import Task

AUTO = "auto"


def chunk_candidates(num_runs: int) -> list[int]:
    """All ``num_runs``, then halves while they divide it and keep 2 runs or more (at most MAX_CANDIDATES)."""
    sizes = [num_runs]
    while len(sizes) < calibrate.MAX_CANDIDATES and sizes[-1] % 2 == 0 and sizes[-1] // 2 >= 2:
        sizes.append(sizes[-1] // 2)
    return sizes


def parse_chunk_size(value, num_runs: int) -> int | str | None:
    """``--chunk-size``: None (all seeds), "auto" or a divisor of the number of seeds (ConfigError otherwise,
    before compiling)."""
    if value is None or value == AUTO:
        return value
    text = str(value).strip()
    if text.isdigit() and int(text) > 0 and num_runs % int(text) == 0:
        return int(text)
    divisors = [d for d in range(1, num_runs + 1) if num_runs % d == 0]
    raise ConfigError(
        f"--chunk-size {value!r}: give auto or a number of seeds that divides --seeds {num_runs} "
        f"({', '.join(map(str, divisors))})."
    )


def probe(task: Task, cfg, keys, shared, size: int) -> calibrate.Probe:
    """Time a segment program of one update on the first ``size`` runs for ``PROBE_SECONDS`` (at least one update)."""
    start = time.perf_counter()
    segments = compile_segments(task, cfg, keys[:size], shared, 1)
    carry = segments.init(cfg, keys[:size], shared)
    compile_seconds = time.perf_counter() - start
    step = lambda carry, first: segments.dispatch(cfg, carry, first, shared)  # noqa: E731
    updates, timed = calibrate.time_updates(step, carry, segments.num_updates, 1)
    return calibrate.Probe(size * updates / timed, time.perf_counter() - start, compile_seconds)


def choose_chunk_size(task: Task, cfg, keys, shared, log) -> calibrate.Calibration:
    """The seeds per call of the segment program for this run (``keys``: one per seed), by the rule above."""
    sizes = chunk_candidates(len(keys))
    if len(sizes) == 1:
        return calibrate.Calibration(sizes, [None], sizes[0], 0.0, "one candidate (no half of 2 or more seeds)")
    samples = len(keys) * task.num_updates(cfg) * task.steps_per_update(cfg)
    why = calibrate.skip_reason(samples, jax.default_backend(), jax.process_count())
    if why is not None:
        return calibrate.Calibration(sizes, [None] * len(sizes), sizes[0], 0.0, why)
    log(f"calibrating the seeds per chunk ({', '.join(map(str, sizes))}) by probes")
    work = len(keys) * task.num_updates(cfg)
    return calibrate.choose(sizes, lambda size: probe(task, cfg, keys, shared, size), work, log, "seeds per chunk")
