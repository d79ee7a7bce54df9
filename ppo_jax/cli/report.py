"""``ppo-jax report DIR... --out R``: rliable statistics, figures and tables of run and sweep directories."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated, Literal

import tyro

from ppo_jax.cli.common import refuse_empty_out, say


@dataclasses.dataclass(frozen=True)
class Report:
    """Report on run and sweep directories: rliable statistics, figures (PNG and PDF), Markdown and LaTeX tables, index.md and index.html.

    A run's final value = mean of the task's score (PPO: episodic return; RLHF: the
    programmatic score) over the last --last-percent of its updates. Scores are
    normalized per env by a random policy (0) and a documented best score (1)
    (ppo_jax/report/scores.py; override with --reference-scores), or with
    --normalize best-setting by the best setting (1), as in the PPO paper, with its
    Table 1 beside ours. RLHF sweeps also get the reward-vs-KL frontier figure.
    All CIs: rliable's stratified bootstrap, 95%, --reps replicates, seeded; a cell with fewer than
    --min-seeds-for-ci seeds gets its per-seed values instead of a CI.
    Docs: docs/guide/reports.md; a worked example: docs/tutorials/sweep-and-report.md.
    """

    dirs: Annotated[tuple[Path, ...], tyro.conf.Positional, tyro.conf.arg(metavar="RUN_DIR")]
    """Run directories (ppo-jax train --out) and sweep directories (ppo-jax sweep --out)."""
    out: Annotated[Path, tyro.conf.arg(metavar="DIR")]
    """Report directory to write (index.md, index.html, figures, tables, data)."""
    last_percent: float | None = None
    """Final value = mean score over this last percentage of each run's logged updates (default: the task's, PPO 5, RLHF 10)."""
    reps: int = 2000
    """Bootstrap replicates per confidence interval."""
    min_seeds_for_ci: int = 5
    """The fewest seeds per cell given a bootstrap CI; a cell with fewer shows its IQM and every seed's value (a resample of so few values can only recombine them), and its column bolds nothing."""
    seed: int = 0
    """Seed of the bootstrap resampling (the report is reproducible for a given seed)."""
    baseline: str | None = None
    """Setting label to compare every other setting against (probability of improvement); default: the best by IQM."""
    reference_scores: Annotated[Path | None, tyro.conf.arg(metavar="FILE.yaml")] = None
    """YAML {env: {random: R, best: B, source: text}} adding or replacing reference scores."""
    normalize: Literal["reference", "best-setting"] = "reference"
    """What scores 1 on each env: reference = its documented best score (the best setting where none is documented); best-setting = the best setting's mean final return on every env, the PPO paper's normalization (Schulman et al. 2017, sec. 6.1), which also writes paper_table1.md/.tex/.png: the mean over envs per setting beside the paper's Table 1."""
    matched_score: float | None = None
    """Language-model sweeps: the score (smoothed over 5 logged updates) at which runs are compared, with the updates and tokens each took to reach it (matched_accuracy.md); default: the highest multiple of 0.05 that 3 in 4 runs of every setting reach."""
    force: Annotated[bool, tyro.conf.FlagCreatePairsOff] = False
    """Replace an existing report directory at --out (only one with report.json; removed once the new one is complete)."""


def run_report(args: Report, argv: list[str]) -> int:
    refuse_empty_out(argv)
    from ppo_jax.report import make_report

    path = make_report(
        list(args.dirs),
        args.out,
        last_percent=args.last_percent,
        reps=args.reps,
        seed=args.seed,
        baseline=args.baseline,
        reference_scores=args.reference_scores,
        normalize=args.normalize,
        force=args.force,
        command=argv,
        min_seeds=args.min_seeds_for_ci,
        matched_score=args.matched_score,
    )
    say(f"report: {path / 'index.md'} (and index.html)")
    return 0
