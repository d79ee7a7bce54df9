"""What ``ppo-jax train`` and ``ppo-jax rlhf`` do once their flags are parsed: ``run_task``, for any ``Task``.

All seeds of one config train as one vmapped program, run as segments of
updates (``ppo_jax.segments``, ``ppo_jax.run_loop``): with ``--out`` the metrics
stream to metrics.csv, checkpoints are written every ``--checkpoint-every`` and on
SIGINT/SIGTERM, and ``--resume`` continues from the newest one.
"""

from __future__ import annotations

import math
import shlex
import signal
import time
from pathlib import Path
from typing import NamedTuple

from ppo_jax.cli.common import fmt, make_keys, say
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


def choose_segment_length(num_updates: int, interval: int | None, has_out: bool) -> int | None:
    """Updates per segment: the checkpoint interval; with --out, 5% of the run (at least 10); else the whole run."""
    if interval is not None:
        return interval
    if has_out:
        return max(MIN_SEGMENT, math.ceil(num_updates * DEFAULT_SEGMENT_PERCENT / 100))
    return None


def run_task(
    task: Task,
    cfg,
    options: RunOptions,
    *,
    out: Path | None,
    force: bool = False,
    progress: bool = True,
    resume: bool = False,
    keep_checkpoints: int = 2,
    log=(),
    argv: list[str],
) -> int:
    """Train ``task`` with ``cfg`` on every seed; print final values; write (or continue) a run directory at ``out``.

    Everything that can be wrong with the input raises ConfigError before anything compiles.
    Returns the exit status: 0, or 128 + the signal number when a signal stopped the run.
    """
    cfg = task.validate(cfg)
    from ppo_jax.loggers import check_loggers
    from ppo_jax.segments import checkpoint_interval
    from ppo_jax.storage.run_dir import prepare_out_dir

    log = check_loggers(log, out)
    num_updates = task.num_updates(cfg)
    interval = checkpoint_interval(options.checkpoint_every, num_updates)
    if keep_checkpoints < 1:
        raise ConfigError(f"--keep-checkpoints must be >= 1, got {keep_checkpoints}.")
    if out is not None and not resume:
        prepare_out_dir(out, force)
    elif force and out is None:
        say("note: --force has no effect without --out")
    if interval is not None and out is None:
        raise ConfigError("--checkpoint-every writes checkpoints into the run directory: add --out DIR.")

    import jax

    from ppo_jax.progress import ProgressReporter
    from ppo_jax.run_loop import Stopped, run_segments
    from ppo_jax.segments import compile_segments, segment_length
    from ppo_jax.storage.provenance import collect_metadata, now_iso

    seeds = options.seeds
    length = options.segment_length or segment_length(
        num_updates,
        choose_segment_length(num_updates, interval, out is not None),
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

    metadata = collect_metadata(argv, task.name) if out is not None else {}
    shared = None
    if task.shared_fields:
        start = time.perf_counter()
        shared = jax.device_get(
            jax.block_until_ready(jax.jit(task.prepare_shared)(cfg, jax.random.key(options.pretrain_seed)))
        )
        described = task.describe_shared(cfg, shared)
        metadata.update(
            pretrain_seed=options.pretrain_seed, pretrain_seconds=time.perf_counter() - start, pretrain=described
        )
        details = ", ".join(f"{k} {fmt(v, 3)}" for k, v in described.items())
        say(
            f"pretrain (seed {options.pretrain_seed}): {metadata['pretrain_seconds']:.2f} s"
            + (f" ({details})" if details else "")
        )

    every = max(1, num_updates // 20)  # 20 host callbacks per run (see ppo_jax.progress.report_update)
    reporter = ProgressReporter(
        num_updates, per_update, len(seeds), score=task.score, unit=unit, enabled=progress, report_every=every
    )
    keys = make_keys(seeds)
    segments = compile_segments(task, cfg, keys, shared, length, on_update=reporter, report_every=every)
    num_segments = len(segments.starts())
    say(
        f"compile: {segments.compile_seconds:.2f} s"
        + (f" ({num_segments} segments of {length} updates)" if num_segments > 1 else "")
    )

    run = checkpoints = None
    first = 0
    carry = segments.init(cfg, keys, shared)
    if out is not None:
        from ppo_jax.storage.checkpoints import Checkpoints
        from ppo_jax.storage.live_run import LiveRun

        if resume:
            run = LiveRun.resume(out)
            checkpoints = Checkpoints(run.checkpoint_dir, keep_checkpoints)
            carry, meta = checkpoints.restore(like=carry)
            check_checkpoint(meta, config_record(task, cfg, seeds), run.checkpoint_dir)
            run.cut_metrics(int(meta["metrics_bytes"]))
            first = int(meta["update"])
            say(f"resuming {run.path} from its checkpoint after update {first}/{num_updates}")
            metadata = {
                **run.metadata(),
                "resumed": [
                    *run.metadata().get("resumed", []),
                    {"time": now_iso(), "update": first, "command": metadata["command"]},
                ],
            }
        else:
            metadata.update(run=options._asdict())
            run = LiveRun.start(out, config=config_record(task, cfg, seeds), metadata=metadata)
            checkpoints = Checkpoints(run.checkpoint_dir, keep_checkpoints)
        if run.path != run.out:
            say(f"writing to {run.path}; it replaces {run.out} once the run is complete")
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
        return 128 + stop.signum
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
    output = jax.device_get(output)
    if run is None:
        window = result.metrics
    else:
        from ppo_jax.storage.run_dir import read_final_window

        window = read_final_window(run.metrics_path, task, seeds, num_updates)
    final = final_values(task, window, num_updates)
    print_final_values(task, seeds, final)
    if evaluation is not None:
        say(
            f"evaluation ({options.eval_episodes} fresh episodes per seed, final parameters): mean return "
            f"stochastic {fmt(float(evaluation.stochastic.mean()))}, deterministic {fmt(float(evaluation.deterministic.mean()))}"
        )

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
        )

        def write_final(path: Path) -> None:
            write_results(path, task=task, seeds=seeds, output=output, shared=shared, evaluation=evaluation)
            write_json(path / METADATA_FILE, metadata)

        say(f"run directory: {run.complete(write_final)}")
    return 0


def check_checkpoint(meta: dict, expected: dict, where: Path) -> None:
    """A checkpoint continues only the run it was written by: its config and seeds must be this run's."""
    stored = meta.get("config", {})
    diff = [f"{k}: checkpoint {stored.get(k)!r}, now {v!r}" for k, v in expected.items() if stored.get(k) != v]
    if diff:
        raise ConfigError(
            f"the checkpoint in {where} was written by a different config; refusing to resume:\n  " + "\n  ".join(diff)
        )


def final_values(task: Task, metrics, num_updates: int) -> dict:
    """``{name: {"per_seed", "mean", "ci95_low", "ci95_high"}}`` for each reported metric.

    ``metrics[name]`` is ``[num_seeds, n]``: the whole run, or (from metrics.csv) just
    the window of last updates that defines final values.
    """
    from ppo_jax.final_values import bootstrap_ci, final_value, final_window

    out = {}
    for name in task.reported:
        values = metrics[name][:, -final_window(num_updates, task.final_fraction) :]
        finals = final_value(values, 1.0)
        mean, low, high = bootstrap_ci(finals)
        out[name] = {"per_seed": [float(v) for v in finals], "mean": mean, "ci95_low": low, "ci95_high": high}
    return out


def print_final_values(task: Task, seeds: list[int], final: dict) -> None:
    names = list(final)
    say(f"final values (mean over the last {100 * task.final_fraction:g}% of updates): {', '.join(names)}")
    for i, s in enumerate(seeds):
        say(f"  seed {s}: " + "  ".join(fmt(final[name]["per_seed"][i], 3) for name in names))
    if len(seeds) > 1:
        for name, entry in final.items():
            ci = (
                f"95% bootstrap CI [{fmt(entry['ci95_low'], 3)}, {fmt(entry['ci95_high'], 3)}]"
                if entry["ci95_low"] == entry["ci95_low"]
                else "no CI: fewer than 2 finite values"
            )
            say(f"  {name}: mean over {len(seeds)} seeds {fmt(entry['mean'], 3)}  ({ci})")
