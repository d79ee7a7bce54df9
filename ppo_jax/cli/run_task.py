"""What ``ppo-jax train``, ``lm`` and ``rlhf`` do once their flags are parsed: ``run_task``, a shell over ``ppo_jax.runs``.

``ppo_jax.runs.run`` trains the seeds and writes the run directory; this module
prints its progress and final values and turns the result into an exit status:
0; ``EXIT_DIVERGED`` (3) when a seed diverged, unless ``--allow-divergence``; 128 +
the signal number when a signal stopped the run (checkpointed, or before its first
update; the process then ends at once, ``ppo_jax.cli.leave``).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np

from ppo_jax.cli.common import fmt, say
from ppo_jax.runs import RunOptions, RunResult, run
from ppo_jax.task_contract import Task

EXIT_DIVERGED = 3
"""Exit status of ``ppo-jax train`` / ``rlhf`` when a seed diverged (without ``--allow-divergence``); 2 is bad input."""


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
    allow_divergence: bool = False,
    memory_budget: int | None = None,
) -> int:
    """``ppo_jax.runs.run`` with its lines printed; returns the exit status (see the module docstring)."""
    result = run(
        task,
        cfg,
        options,
        out=out,
        force=force,
        progress=progress,
        resume=resume,
        keep_checkpoints=keep_checkpoints,
        log=log,
        argv=argv,
        say=say,
        report=lambda result: print_result(task, options, result),
        memory_budget=memory_budget,
    )
    if result.stopped_by is not None:
        return 128 + result.stopped_by
    return exit_status(result.diverged, len(result.seeds), allow_divergence)


def print_result(task: Task, options: RunOptions, result: RunResult) -> None:
    """The final values per seed and over seeds, then the evaluation (per-run scalars or PPO's episodes)."""
    seeds, diverged, scalars, evaluation = result.seeds, result.diverged, result.scalars, result.evaluation
    print_final_values(task, seeds, result.final, diverged)
    kept = [i for i, s in enumerate(seeds) if s not in diverged]  # a diverged seed's parameters are not finite
    if scalars and evaluation is None:  # PPO's evaluation is printed episode by episode below
        say(
            "evaluation (final parameters, fresh prompts; mean over the seeds that did not diverge): "
            + ", ".join(
                f"{name} {fmt(_mean(np.asarray(values)[kept]), 3)}"
                for name, values in scalars.items()
                if not np.isnan(np.asarray(values, float)).all()  # a pass@k above the samples drawn
            )
        )
    if evaluation is not None:
        over = "" if len(kept) == len(seeds) else f"; over the {len(kept)} of {len(seeds)} seeds that did not diverge"
        say(
            f"evaluation ({options.eval_episodes} fresh episodes per seed, final parameters{over}): mean return "
            f"stochastic {fmt(_mean(evaluation.stochastic[kept]))}, deterministic {fmt(_mean(evaluation.deterministic[kept]))}"
        )


def exit_status(diverged: dict[int, dict], num_seeds: int, allow_divergence: bool) -> int:
    """0, or ``EXIT_DIVERGED`` if a seed diverged and that is not allowed; each diverged seed named on stderr."""
    for seed, where in diverged.items():
        print(f"seed {seed} diverged at update {where['update']} ({where['reason']})", file=sys.stderr)
    if not diverged or allow_divergence:
        return 0
    print(
        f"error: {len(diverged)} of {num_seeds} seed{'s' if num_seeds > 1 else ''} diverged: exit status "
        f"{EXIT_DIVERGED} (--allow-divergence exits 0)",
        file=sys.stderr,
    )
    return EXIT_DIVERGED


def _mean(values) -> float:
    return float(np.mean(values)) if len(values) else math.nan


def print_final_values(task: Task, seeds: list[int], final: dict, diverged: dict | None = None) -> None:
    """Per seed its final values (or where it diverged); per metric the mean over seeds, saying which seeds it leaves out."""
    diverged = diverged or {}
    names = list(final)
    say(f"final values (mean over the last {100 * task.final_fraction:g}% of updates): {', '.join(names)}")
    for i, s in enumerate(seeds):
        if s in diverged:
            say(f"  seed {s}: diverged at update {diverged[s]['update']} ({diverged[s]['reason']})")
        else:
            say(f"  seed {s}: " + "  ".join(fmt(final[name]["per_seed"][i], 3) for name in names))
    if len(seeds) > 1:
        for name, entry in final.items():
            ci = (
                f"95% bootstrap CI [{fmt(entry['ci95_low'], 3)}, {fmt(entry['ci95_high'], 3)}]"
                if entry["ci95_low"] == entry["ci95_low"]
                else "no CI: fewer than 2 finite values"
            )
            dropped = entry.get("dropped", 0)
            over = f"{len(seeds)} seeds"
            if dropped:
                left = [f"{len(diverged)} diverged"] if diverged else []
                left += [f"{dropped - len(diverged)} without a value"] if dropped > len(diverged) else []
                over = f"{len(seeds) - dropped} of {len(seeds)} seeds ({', '.join(left)})"
            say(f"  {name}: mean over {over} {fmt(entry['mean'], 3)}  ({ci})")
