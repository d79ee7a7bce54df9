"""Run a config of any ``Task`` on a list of seeds into a run directory: ``run``, the library behind ``ppo-jax train``.

    from ppo_jax.runs import RunOptions, run
    from ppo_jax.task_registry import get_task
    result = run(get_task("ppo"), PPOConfig(env="CartPole-v1"), RunOptions(seeds=[0, 1, 2]), out=Path("runs/first"))
    result.final["episode_return"]["mean"], result.run_dir

All seeds of one config train as one vmapped program, run as segments of
updates (``ppo_jax.segments``, ``ppo_jax.run_loop``): with ``out`` the metrics
stream to metrics.csv, checkpoints are written every ``checkpoint_every`` and on
SIGINT/SIGTERM, and ``resume`` continues from the newest one. The directory is
written before pretraining (status "running"); a signal before the first update
(pretraining, compiling) stops the run at once with status "interrupted", and
``resume`` starts it over (``RunResult.stopped_by`` says which signal).

A seed whose run diverged (``non_finite``, ``ppo_jax.scan_updates``: a non-finite
loss or training state) is in ``RunResult.diverged`` with the update it diverged at
and why; its final values are NaN ("diverged"), means over seeds are over the
others, and metadata.json lists it under "diverged". The command line
(``ppo_jax.cli.run_task``) prints the result and turns it into an exit status.
"""

from __future__ import annotations

import contextlib
import math
import shlex
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from ppo_jax.errors import ConfigError
from ppo_jax.storage.run_dir import config_record
from ppo_jax.task_contract import Task

DEFAULT_SEGMENT_PERCENT = 5
"""With a run directory, a run is cut into segments of 5% of its updates (at least 10) unless checkpoints ask for less."""
MIN_SEGMENT = 10


class RunOptions(NamedTuple):
    """The run's own settings besides the config (recorded in metadata.json as "run", reused by --resume)."""

    seeds: list[int]
    pretrain_seed: int = 0
    eval_episodes: int = 0
    checkpoint_every: str | None = None
    segment_length: int | None = None  # fixed by the run's start; None: chosen from the above
    preset: str | None = None  # the named base config the run started from (ppo_jax.rl.presets), if any
    chunk_size: int | str | None = (
        None  # seeds per call of the program (ppo_jax.seed_chunks; None: all); fixed at the start
    )


class RunResult(NamedTuple):
    """What ``run`` returns: final values per reported metric, diverged seeds, evaluations, the trained output."""

    seeds: list[int]
    final: dict
    """``{name: {"per_seed", "mean", "ci95_low", "ci95_high", "dropped"}}`` (``final_values``); {} if stopped."""
    diverged: dict
    """``{seed: {"update", "reason"}}`` of the seeds whose run diverged."""
    scalars: dict
    """The task's per-run evaluation (``eval_names``): ``{name: [per seed]}``."""
    evaluation: Any
    """The per-episode evaluation (PPO with ``eval_episodes``), or None."""
    output: Any
    """The engine's output (stacked over seeds), on the host; None if stopped."""
    run_dir: Path | None
    """The complete run directory (None without ``out``); when stopped, the directory holding the checkpoint."""
    stopped_by: int | None = None
    """The signal that stopped the run (its directory says interrupted; continue with ``resume=True``), or None."""


def _quiet(*parts) -> None:
    """The default ``say``: nothing."""


def make_keys(seeds: list[int]):
    """Stacked PRNG keys, one per seed: ``jax.random.key(s)`` for each s."""
    import jax
    import jax.numpy as jnp

    return jnp.stack([jax.random.key(s) for s in seeds])


def choose_segment_length(num_updates: int, interval: int | None, has_out: bool) -> int | None:
    """Updates per segment: the checkpoint interval; with --out, 5% of the run (at least 10); else the whole run."""
    if interval is not None:
        return interval
    if has_out:
        return max(MIN_SEGMENT, math.ceil(num_updates * DEFAULT_SEGMENT_PERCENT / 100))
    return None


def run(
    task: Task,
    cfg,
    options: RunOptions,
    *,
    out: Path | str | None = None,
    force: bool = False,
    progress: bool = False,
    resume: bool = False,
    keep_checkpoints: int = 2,
    log=(),
    argv: list[str] | None = None,
    say: Callable[..., None] = _quiet,
    report: Callable[[RunResult], None] = lambda result: None,
    memory_budget: int | None = None,
) -> RunResult:
    """Train ``task`` with ``cfg`` on every seed of ``options``; write (or continue) a run directory at ``out``.

    Everything that can be wrong with the input raises ConfigError before anything compiles.
    ``say(*parts)`` receives the progress lines (compile and run times, where the directory is);
    ``report(result)`` is called once the final values are known, before the directory is completed
    (the command line prints them there). ``argv`` is the command recorded in metadata.json.
    ``memory_budget`` (bytes per device; None: no check): the update program is compiled on abstract shapes
    first and its memory estimate said; over the budget, ConfigError before pretraining (``ppo_jax.memory_estimate``).
    """
    argv = list(argv) if argv is not None else ["ppo_jax.runs.run"]
    if out is not None and not str(out):
        raise ConfigError("out is empty: give the run directory to write (a path; '.' for the current directory).")
    out = None if out is None else Path(out)
    cfg = task.validate(cfg)
    from ppo_jax.loggers import check_loggers
    from ppo_jax.segments import checkpoint_interval
    from ppo_jax.storage.locks import DirectoryLock
    from ppo_jax.storage.run_dir import prepare_out_dir

    log = check_loggers(log, out)
    num_updates = task.num_updates(cfg)
    interval = checkpoint_interval(options.checkpoint_every, num_updates)
    if keep_checkpoints < 1:
        raise ConfigError(f"--keep-checkpoints must be >= 1, got {keep_checkpoints}.")
    _lock = out and DirectoryLock(out).acquire()  # --out to this process until run_task returns (storage/locks.py)
    if out is not None and not resume:
        prepare_out_dir(out, force)
    elif force and out is None:
        say("note: --force has no effect without --out")
    if interval is not None and out is None:
        raise ConfigError("--checkpoint-every writes checkpoints into the run directory: add --out DIR.")

    import jax

    from ppo_jax.progress import ProgressReporter
    from ppo_jax.run_loop import Interrupted, Stopped, interrupts, run_segments
    from ppo_jax.seed_chunks import AUTO, choose_chunk_size
    from ppo_jax.segments import compile_segments, segment_length
    from ppo_jax.storage.provenance import collect_metadata, now_iso

    seeds = options.seeds
    length = options.segment_length or segment_length(
        num_updates,
        choose_segment_length(num_updates, interval, out is not None or jax.process_count() > 1),  # all: process 0's
        num_runs=len(seeds),
        num_metrics=len(task.metric_names),
    )
    options = options._replace(segment_length=length)
    per_update, unit = task.steps_per_update(cfg), task.sample_unit
    samples = len(seeds) * num_updates * per_update
    say(
        f"{task.env_of(cfg)}: {len(seeds)} seed{'s' if len(seeds) > 1 else ''} x {num_updates} updates x {per_update} "
        f"{unit} = {samples:,} {unit} on {jax.default_backend()}"
    )

    every = max(1, num_updates // 20)  # 20 host callbacks per run (see ppo_jax.progress.report_update)
    reporter = ProgressReporter(
        num_updates, per_update, len(seeds), score=task.score, unit=unit, enabled=progress, report_every=every
    )
    keys = make_keys(seeds)
    checked = None  # with a budget: the segment program, compiled on abstract shapes before pretraining
    if memory_budget is not None:
        from ppo_jax.memory_estimate import checked_segments

        size = options.chunk_size if isinstance(options.chunk_size, int) else 0
        checked = checked_segments(
            task, cfg, keys, length, memory_budget, say, seed=options.pretrain_seed, on_update=reporter,
            report_every=every, chunk_size=0 if size == len(seeds) else size,
        )  # fmt: skip

    metadata = collect_metadata(argv, task.name) if out is not None else {}
    run = checkpoints = None
    if out is not None:  # the directory says "running" from here on, "interrupted" if a signal stops the run
        from ppo_jax.storage.live_run import LiveRun

        command = metadata["command"]
        if resume:
            run = LiveRun.resume(out)
            metadata, resumed_at = run.metadata(), now_iso()
        else:
            metadata.update(run=options._asdict())
            run = LiveRun.start(out, config=config_record(task, cfg, seeds), metadata=metadata)
        if run.path != run.out:
            say(f"writing to {run.path}; it replaces {run.out} once the run is complete")

    # Until the first segment a signal stops the run at once (with a run directory; without, it acts as usual).
    stage, first = "compiling", 0
    try:
        with interrupts() if run is not None else contextlib.nullcontext():
            shared = host_shared = None
            if task.shared_fields:
                stage, start = "pretraining", time.perf_counter()
                shared = jax.device_get(
                    jax.block_until_ready(jax.jit(task.prepare_shared)(cfg, jax.random.key(options.pretrain_seed)))
                )
                described = task.describe_shared(cfg, shared)
                metadata.update(
                    pretrain_seed=options.pretrain_seed,
                    pretrain_seconds=time.perf_counter() - start,
                    pretrain=described,
                )
                details = ", ".join(f"{k} {'nan' if v != v else f'{v:.3f}'}" for k, v in described.items())
                say(
                    f"pretrain (seed {options.pretrain_seed}): {metadata['pretrain_seconds']:.2f} s"
                    + (f" ({details})" if details else "")
                )
                host_shared, shared = shared, task.place(cfg, shared)  # an LM run's --mesh: sharded over it

            stage = "compiling"
            if options.chunk_size == AUTO:
                calibration = choose_chunk_size(task, cfg, keys, shared, say)
                options = options._replace(chunk_size=calibration.chosen)
                if out is not None:
                    metadata.update(seed_chunks=calibration.to_dict())
                say(f"seeds per chunk: {calibration.chosen} ({calibration.note}; {calibration.seconds:.1f} s)")
            options = options._replace(chunk_size=options.chunk_size or len(seeds))
            chunk = 0 if options.chunk_size == len(seeds) else options.chunk_size
            segments = checked  # compiled before pretraining for the memory check: the same program
            if checked is None or checked.chunk_size != chunk:
                segments = compile_segments(
                    task, cfg, keys, shared, length, on_update=reporter, report_every=every, chunk_size=chunk
                )
            num_segments = len(segments.starts())
            say(
                f"compile: {segments.compile_seconds:.2f} s"
                + (f" ({num_segments} segments of {length} updates)" if num_segments > 1 else "")
                + (f" (seeds {options.chunk_size} at a time)" if chunk else "")
            )

            stage = "starting"
            carry = segments.init(cfg, keys, shared)
            if run is not None:
                from ppo_jax.storage.checkpoints import Checkpoints

                # Orbax syncs every process, and only process 0 has the directory: no checkpoints across processes.
                checkpoints = Checkpoints(run.checkpoint_dir, keep_checkpoints) if jax.process_count() == 1 else None
                if resume and (checkpoints.updates() or run.metrics_path.exists()):
                    carry, meta = checkpoints.restore(like=carry)
                    check_checkpoint(meta, config_record(task, cfg, seeds), run.checkpoint_dir)
                    run.cut_metrics(int(meta["metrics_bytes"]))
                    first = int(meta["update"])
                    say(f"resuming {run.path} from its checkpoint after update {first}/{num_updates}")
                elif resume:  # stopped before its first update (pretraining, compiling): it starts over
                    check_checkpoint({"config": run.config()}, config_record(task, cfg, seeds), run.path)
                    say(f"resuming {run.path} from the start: it stopped before its first update")
                if resume:
                    resumed = {"time": resumed_at, "update": first, "command": command}
                    metadata["resumed"] = [*metadata.get("resumed", []), resumed]
                metadata.update(run=options._asdict())  # the run's settings, with the chunk size chosen
                run.update_metadata(**metadata)
    except Interrupted as stop:
        run.update_metadata(status="interrupted")
        if checkpoints is not None:
            checkpoints.close()
        kept = [int(p.name) for p in run.checkpoint_dir.glob("*") if p.name.isdigit()]
        where = (
            f" (its checkpoint after update {max(kept)}/{num_updates} is kept)" if kept else ", before the first update"
        )
        say(f"stopped by {signal.Signals(stop.signum).name} while {stage}{where}; {run.path} says interrupted")
        say(f"continue with: ppo-jax {task.command} --out {shlex.quote(str(run.out))} --resume")
        return RunResult(seeds, {}, {}, {}, None, None, run.path, stop.signum)
    from ppo_jax.loggers import make_loggers

    loggers = make_loggers(log, run.path, seeds, cfg.to_dict(), first) if run is not None else []
    reporter.start_update = first
    try:
        with reporter:
            result = run_segments(
                segments,
                task,
                cfg,
                seeds,
                carry,
                shared,
                first_update=first,
                run=run,
                checkpoints=checkpoints,
                checkpoint_every=interval,
                loggers=loggers,
                meta={"config": config_record(task, cfg, seeds)},
            )
    except Stopped as stop:
        run.update_metadata(status="interrupted")
        resume_command = f"ppo-jax {task.command} --out {shlex.quote(str(run.out))} --resume"
        say(
            f"stopped by {signal.Signals(stop.signum).name} after update {stop.update}/{num_updates}; checkpoint in {run.checkpoint_dir}"
        )
        say(f"continue with: {resume_command}")
        return RunResult(seeds, {}, {}, {}, None, None, run.path, stop.signum)
    finally:
        for logger in loggers:
            logger.close()
        if checkpoints is not None:
            checkpoints.close()
    done_samples = len(seeds) * result.updates_run * per_update
    say(f"run:     {result.run_seconds:.2f} s  ({done_samples / result.run_seconds:,.0f} {unit}/s)")

    output = task.finish(cfg, result.carry, result.metrics or {})
    evaluation = None
    if options.eval_episodes > 0:
        episodes = jax.jit(jax.vmap(lambda o, k: task.evaluate_episodes(cfg, o, k, options.eval_episodes)))
        evaluation = jax.device_get(episodes(output, keys))
    scalars = {}  # the task's per-run evaluation (eval_names), with the key a sweep gives it: the run's own
    if task.eval_names:
        scalars = to_host(
            jax.jit(jax.vmap(lambda o, k, s: task.evaluate(cfg, o, k, s), (0, 0, None)))(output, keys, shared)
        )
        scalars = {name: [float(v) for v in scalars[name]] for name in task.eval_names}
    output = to_host(output)
    if run is None:
        window = result.metrics
    else:
        from ppo_jax.storage.run_dir import read_final_window

        window = read_final_window(run.metrics_path, task, seeds, num_updates)
    diverged = divergences(seeds, result.metrics, None if run is None else run.metrics_path)
    final = final_values(task, window, num_updates, diverged=[s in diverged for s in seeds])
    outcome = RunResult(seeds, final, diverged, scalars, evaluation, output, None)
    report(outcome)

    if run is not None:
        from ppo_jax.storage.atomic import write_json
        from ppo_jax.storage.run_dir import METADATA_FILE, write_results

        metadata.update(
            end_time=now_iso(),
            compile_seconds=segments.compile_seconds,
            run_seconds=result.run_seconds,
            env_steps=samples,
            env_steps_per_second=done_samples / result.run_seconds,
            final={"definition": f"mean over the last {100 * task.final_fraction:g}% of updates", **final},
            **({"evaluation": {"per_seed": scalars, "seeds": seeds}} if scalars else {}),
            diverged=[{"seed": s, **diverged[s]} for s in seeds if s in diverged],
        )

        def write_final(path: Path) -> None:
            write_results(path, task=task, seeds=seeds, output=output, shared=host_shared, evaluation=evaluation)
            task.export(cfg, output, seeds, path, host_shared)
            write_json(path / METADATA_FILE, metadata)

        outcome = outcome._replace(run_dir=run.complete(write_final))
        say(f"run directory: {outcome.run_dir}")
    return outcome


def to_host(tree):
    """A program's arrays as host arrays: ``jax.device_get``; an array split across processes (``jax.distributed``)
    is gathered whole by each (``process_allgather``: a collective, so every process calls it on the same arrays)."""
    import jax
    from jax.experimental import multihost_utils

    def fetch(x):
        if isinstance(x, jax.Array) and not x.is_fully_addressable:
            return multihost_utils.process_allgather(x, tiled=True)
        return jax.device_get(x)

    return jax.tree.map(fetch, tree)


def divergences(seeds: list[int], metrics: dict | None, metrics_path: Path | None) -> dict[int, dict]:
    """``{seed: {"update": u, "reason": why}}`` for each seed whose run diverged (``ppo_jax.final_values``).

    From ``metrics`` (``[num_seeds, num_updates]`` in memory) or, when they went there, from metrics.csv.
    """
    from ppo_jax.final_values import divergence_flags, divergence_reason, first_divergence

    if metrics is None:
        from ppo_jax.storage.run_dir import read_divergences

        found = read_divergences(metrics_path, seeds)
    else:
        flags = divergence_flags(metrics)
        first = first_divergence(flags) if flags is not None else np.full(len(seeds), -1)
        found = {
            s: (int(u), float(metrics["loss"][i, u]) if "loss" in metrics else math.nan)
            for i, (s, u) in enumerate(zip(seeds, first, strict=True))
            if u >= 0
        }
    return {int(s): {"update": u, "reason": divergence_reason(loss)} for s, (u, loss) in sorted(found.items())}


def check_checkpoint(meta: dict, expected: dict, where: Path) -> None:
    """A checkpoint continues only the run it was written by: its config and seeds must be this run's."""
    stored = meta.get("config", {})
    diff = [f"{k}: checkpoint {stored.get(k)!r}, now {v!r}" for k, v in expected.items() if stored.get(k) != v]
    if diff:
        raise ConfigError(
            f"the checkpoint in {where} was written by a different config; refusing to resume:\n  " + "\n  ".join(diff)
        )


def final_values(task: Task, metrics, num_updates: int, diverged=None) -> dict:
    """``{name: {"per_seed", "mean", "ci95_low", "ci95_high", "dropped"}}`` for each reported metric.

    ``metrics[name]`` is ``[num_seeds, n]``: the whole run, or (from metrics.csv) just
    the window of last updates that defines final values. ``diverged[i]``: seed i's run
    diverged, so its final values are NaN. The mean and CI are over the finite
    per-seed values; ``dropped`` counts the others (diverged seeds among them).
    """
    from ppo_jax.final_values import final_value, final_window, seed_ci

    out = {}
    for name in task.reported:
        values = metrics[name][:, -final_window(num_updates, task.final_fraction) :]
        finals = final_value(values, 1.0)
        if diverged is not None:
            finals = np.where(np.asarray(diverged, dtype=bool), np.nan, finals)
        ci = seed_ci(finals)
        out[name] = {
            "per_seed": [float(v) for v in finals],
            "mean": ci.mean,
            "ci95_low": ci.low,
            "ci95_high": ci.high,
            "dropped": ci.dropped,
        }
    return out
