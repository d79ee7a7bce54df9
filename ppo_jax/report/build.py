"""``make_report``: run and sweep directories -> a report directory of statistics, figures and tables.

    from ppo_jax.report import make_report
    make_report(["runs/clip_eps_quick"], "reports/clip_eps_quick")

Report directory::

    index.md, index.html      everything below, with definitions and provenance
    report.json               parameters, reference scores, sources (spec, commit, versions, hardware, command)
    final_returns.csv         one row per run: final return, normalized score, evaluation returns
    curves.csv                per run: the score and the curves drawn, at <= sections.MAX_CURVE_POINTS logged updates
    per_env.csv               IQM / mean of final return and of normalized score per env x setting, 95% CIs
    aggregates.csv            median, IQM, mean, optimality gap of normalized scores over envs, 95% CIs
    improvement.csv           P(setting > baseline), 95% CIs
    final_return.{md,tex}     table: IQM final return [95% CI] per setting x env, bold by tables.BOLD_RULE
    aggregates.{md,tex}       table: aggregate metrics per setting
    paper_table1.{md,tex}     (--normalize best-setting) the PPO paper's Table 1 beside ours, and its figure
    paper_rank_agreement.csv  (--normalize best-setting) Spearman / Kendall between our ranking and the paper's
    evaluation.md             evaluation of the final parameters (stochastic / deterministic policy)
    evaluation_scores.*       (lm) the task's evaluation scores (pass@1, pass@G on fresh prompts): IQM [95% CI]
    final_metrics*.{csv,md}   (lm, rlhf) final values of the task's reported metrics per run, IQM [95% CI] per setting
    frontier.{csv,md}         (lm, rlhf) final KL to the reference and two scores per setting
    entropy_fit*.{csv,md}     (lm, rlhf) Cui et al.'s R = -a exp(H) + b fitted per run; IQM of a, b per setting
    *.png, *.pdf              learning curves (score; entropy, response length, KL where recorded), sensitivity or heat map,
                              aggregate intervals, probability of improvement, performance profiles,
                              (RLHF) the reward vs KL frontier

"Final return" is the final value of the task's score (``Task.score``: PPO's
episodic return, RLHF's programmatic score). A diverged run is never dropped
silently: it is scored by ``ppo_jax.report.scores.DIVERGED_RULE``, counted in
every cell ("(k/n diverged)"), and listed in report.json and index.md.

Each part of the report is a ``ppo_jax.report.sections.Section``; ``SECTIONS``
lists them in order and ``make_report`` runs those that apply. Code outside the
package adds one with ``register_section`` (``unregister_section`` removes it).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ppo_jax.errors import ReportError
from ppo_jax.final_values import NON_FINITE
from ppo_jax.report import (
    entropy_fit,
    frontier,
    intervals,
    matched_accuracy,
    metric_tables,
    paper_table1,
    scores,
    sections,
)
from ppo_jax.report.index import sources_line, stamp_tables, write_index
from ppo_jax.report.scores import NORMALIZATIONS, bounded_references, load_reference_scores
from ppo_jax.report.sections import Context, Section
from ppo_jax.report.sections import grid_fields as _grid_fields  # noqa: F401  (its old name here, for callers)
from ppo_jax.report.sources import Runs, load_sources
from ppo_jax.storage.atomic import absolute, check_out_dir, write_directory, write_json

SECTIONS: list[Section] = [
    sections.FINAL_RETURNS,
    sections.RUN_CURVES,
    sections.PER_ENV,
    sections.AGGREGATES,
    paper_table1.SECTION,
    metric_tables.EVALUATION,
    metric_tables.FINAL_METRICS,
    metric_tables.EVALUATION_SCORES,
    sections.LEARNING_CURVES,
    frontier.SECTION,
    entropy_fit.SECTION,
    matched_accuracy.SECTION,
    sections.HEATMAP,
    sections.SENSITIVITY,
]
"""The report's sections in order: each runs where it applies, after those above it (whose ``ctx.found`` it reads)."""


def register_section(section: Section, *, after: str | None = None) -> Section:
    """Add ``section`` to ``SECTIONS``: at the end, or right after the section named ``after``; ValueError if its
    name is taken or ``after`` names none."""
    names = [s.name for s in SECTIONS]
    if section.name in names:
        raise ValueError(f"report section {section.name!r} is registered already")
    if after is not None and after not in names:
        raise ValueError(f"no report section {after!r} to add {section.name!r} after; sections: {names}")
    SECTIONS.insert(len(SECTIONS) if after is None else names.index(after) + 1, section)
    return section


def unregister_section(name: str) -> Section:
    """Remove the section ``name`` from ``SECTIONS`` (tests that register a toy section restore the list with it)."""
    index = [s.name for s in SECTIONS].index(name)
    return SECTIONS.pop(index)


def _analyse(
    runs: Runs, out: Path, *, last_percent, reps, seed, baseline, references, normalize, min_seeds, matched_score
) -> dict:
    """Run every section of ``SECTIONS`` that applies; returns what they found (``Context.found``), ``files``
    (data, tables, figures: the names written, in order) and ``titles`` (index.md's headings)."""
    ctx = Context(
        runs,
        out,
        last_percent=last_percent,
        reps=reps,
        seed=seed,
        baseline=baseline,
        references=references,
        normalize=normalize,
        min_seeds=min_seeds,
        envs=list(dict.fromkeys(runs.curves["env"])),
        settings=list(runs.settings),
        matched_score=matched_score,
    )
    files = {"data": [], "tables": [], "figures": []}
    titles = {}
    for section in SECTIONS:
        if section.applies(ctx):
            written = section.write(ctx)
            for kind, names in written._asdict().items():
                files[kind] += names
            titles.update(section.titles)
    return {"envs": ctx.envs, "settings": ctx.settings, **ctx.found, "files": files, "titles": titles}


def _recorded(runs: Runs, source: int) -> bool:
    """Whether source ``source``'s tables hold ``non_finite`` (else divergence is read off a non-finite loss)."""
    return bool(runs.curves.loc[runs.curves["source"] == source, NON_FINITE].notna().any())


def make_report(
    paths,
    out,
    *,
    last_percent: float | None = None,
    reps: int = 2000,
    seed: int = 0,
    baseline: str | None = None,
    reference_scores=None,
    normalize: str = "reference",
    force: bool = False,
    command: list[str] | None = None,
    min_seeds: int = intervals.MIN_SEEDS,
    matched_score: float | None = None,
) -> Path:
    """Write a report for the runs in ``paths`` (run or sweep directories of one task) to ``out``; returns ``out``.

    ``last_percent``: the share of each run's last updates whose mean is its final
    value (default: the task's, ``Task.final_fraction``). ``normalize``: "reference"
    (a documented best score = 1 where there is one) or "best-setting" (the PPO
    paper's normalization everywhere, and its Table 1 beside ours:
    ``ppo_jax.report.paper_table1``). ``min_seeds``: the fewest seeds per cell
    given a bootstrap CI (``intervals.NO_CI_RULE``). ``matched_score``: the score at which
    language-model runs are compared (``matched_accuracy``; None: its default rule). Everything is checked
    and read before anything is written; the report is built in a temporary
    sibling directory and renamed into place (``ppo_jax.storage.atomic``), so
    ``out`` is either the complete new report or untouched (with ``force``, an
    old report is removed only once the new one is complete).
    """
    out = absolute(out)
    if reps < 100:
        raise ReportError(f"--reps must be at least 100 for a usable 95% CI, got {reps}.")
    if isinstance(min_seeds, bool) or not isinstance(min_seeds, int) or min_seeds < 2:
        raise ReportError(f"--min-seeds-for-ci must be an integer of at least 2, got {min_seeds!r}.")
    if matched_score is not None and not np.isfinite(matched_score):
        raise ReportError(f"--matched-score must be a finite number, got {matched_score!r}.")
    if normalize not in NORMALIZATIONS:
        raise ReportError(f"--normalize must be one of {', '.join(NORMALIZATIONS)}, got {normalize!r}.")
    check_out_dir(
        out,
        force,
        replaceable=lambda p: (p / "report.json").is_file(),
        what="report directory",
        marker="no report.json",
        error=ReportError,
    )
    runs = load_sources([Path(p) for p in paths])
    references = load_reference_scores(reference_scores, bounded_references(runs.task, runs.curves["env"].unique()))
    if normalize == "best-setting" and runs.task.name != "ppo":
        raise ReportError(
            f"--normalize best-setting is the PPO paper's normalization of returns (random policy = 0); "
            f"the {runs.task.name} task's score has fixed bounds: use --normalize reference."
        )
    if last_percent is None:
        last_percent = 100 * runs.task.final_fraction

    def write(tmp: Path) -> None:
        result = _analyse(
            runs,
            tmp,
            last_percent=last_percent,
            reps=reps,
            seed=seed,
            baseline=baseline,
            references=references,
            normalize=normalize,
            min_seeds=min_seeds,
            matched_score=matched_score,
        )
        record = {
            "task": runs.task.name,
            "parameters": {
                "last_percent": last_percent,
                "reps": reps,
                "seed": seed,
                "baseline": result.get("baseline"),
                "normalize": normalize,
                "confidence": 0.95,
                "bootstrap": "rliable stratified percentile bootstrap"
                + (
                    f"; per env x setting, 95% CI, hierarchical bootstrap over {runs.curves['pretrain_seed'].nunique()} "
                    f"SFT models x {runs.curves['seed'].nunique()} RL seeds (SFT models resampled with replacement, "
                    "then the RL seeds within each drawn model) in the per-env tables (final values, evaluation, "
                    "matched accuracy); the aggregates over envs and P(X > Y) resample runs as exchangeable (not "
                    "hierarchical), so their intervals are narrower than the per-env ones of the same runs"
                    if runs.nested
                    else ""
                ),
                "min_seeds_for_ci": min_seeds,
                "matched_score": result.get("matched_score"),
            },
            "score": {"metric": runs.task.score, "label": runs.task.score_label},
            "normalizers": {
                env: {"random": r, "best": b, "source": s} for env, (r, b, s) in result["normalizers"].items()
            },
            "setting_fields": runs.setting_fields,
            "settings": runs.settings,
            "divergence": {
                "rule": scores.DIVERGED_RULE,
                "recorded": [
                    NON_FINITE in runs.curves.columns and _recorded(runs, i) for i in range(len(runs.provenance))
                ],
                "runs": [
                    {
                        "env": r.env,
                        "setting": r.setting,
                        **({"pretrain_seed": int(r.pretrain_seed)} if runs.nested else {}),
                        "seed": int(r.seed),
                        "update": int(r.diverged_at),
                    }
                    for r in result["finals"][result["finals"]["diverged"]].itertuples()
                ],
            },
            "sources": runs.provenance,
            "command": command,
        }
        stamp_tables(tmp, result["files"]["tables"], sources_line(runs.provenance))
        write_json(tmp / "report.json", record)
        write_index(tmp, result, record)

    return write_directory(out, write)[0]
