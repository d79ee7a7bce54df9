"""A report is an ordered list of ``Section`` s (``ppo_jax.report.build.SECTIONS``); the sections every report has.

A section is one part of a report: a name, ``applies(ctx)`` (does it belong in
this report?), ``write(ctx) -> Files`` (write its files into ``ctx.out``; it may
add what it found to ``ctx.found`` for the sections after it) and ``titles``
(index.md's heading for each of its Markdown tables and figures). ``make_report``
runs every section that applies, in list order, and lists their files in
index.md and index.html in that order. A new section is one ``Section`` beside
its code and one entry of ``SECTIONS`` (``build.register_section`` from outside
the package).

Here, the sections every report has: final returns, per-run curves, the final
return per env, aggregates over envs, learning curves, and the heat map or
sensitivity figure. The others live beside their code: ``paper_table1``,
``metric_tables`` (evaluation, final metrics, evaluation scores), ``frontier``,
``entropy_fit``.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from ppo_jax.errors import ReportError
from ppo_jax.report import figures, intervals, scores, tables
from ppo_jax.report.sources import PRETRAIN_SEED, Runs, per_run_table

MAX_CURVE_POINTS = 150
TAUS = np.linspace(0.0, 1.25, 51)

CURVES = (
    ("entropy", "policy entropy"),
    ("sample_entropy", "entropy of the sampled tokens"),
    ("response_length", "response length (tokens)"),
    ("kl_ref", "KL to the reference per response (nats)"),
    ("length_correct", "length of correct responses (tokens)"),
    ("length_incorrect", "length of incorrect responses (tokens)"),
)
"""Metrics drawn as learning curves beside the score, where the runs record them."""


@dataclass
class Context:
    """A report being built: its runs, its options (``make_report``'s), its directory ``out``, and ``found``: what
    the sections found so far, by name. The sections here add ``normalizers``, ``finals`` (one row per run),
    ``raw`` and ``scored`` (``intervals.per_env`` of the final return and of the normalized score), ``per_env``,
    ``complete`` (the settings run on every env), ``scorable``, ``matrices`` (setting -> ``[runs, envs]`` scores),
    ``with_ci``, and where the aggregates apply ``aggregates`` and (2+ settings) ``improvement``, ``baseline``."""

    runs: Runs
    out: Path
    last_percent: float
    reps: int
    seed: int
    baseline: str | None
    references: dict
    normalize: str
    min_seeds: int
    envs: list[str]
    settings: list[str]
    found: dict = field(default_factory=dict)
    matched_score: float | None = None  # the score runs are compared at (``matched_accuracy``); None: its default


class Files(NamedTuple):
    """What a section wrote, in order: names of files in the report directory (a figure: its .png and .pdf)."""

    data: Sequence[str] = ()
    tables: Sequence[str] = ()
    figures: Sequence[str] = ()


def always(ctx: Context) -> bool:
    """A section's default ``applies``: every report."""
    return True


@dataclass(frozen=True)
class Section:
    """One part of a report: ``write(ctx)`` runs where ``applies(ctx)``; ``titles``: index.md's heading per
    Markdown table (by file name, ``"final_return.md"``) and per figure (by stem, ``"heatmap"``)."""

    name: str
    write: Callable[[Context], Files]
    applies: Callable[[Context], bool] = always
    titles: Mapping[str, str] = field(default_factory=dict)


def _final_returns(ctx: Context) -> Files:
    """final_returns.csv: each run's final return, its evaluation (if any) and its normalized score."""
    finals = scores.final_returns(ctx.runs, ctx.last_percent)
    if len(ctx.runs.evals):
        evals = ctx.runs.evals.drop(columns=["source"])
        finals = finals.merge(evals, on=["env", "setting", PRETRAIN_SEED, "seed"], how="left")
    norms = scores.normalizers(finals, ctx.references, ctx.normalize)
    finals["score"] = scores.normalize(finals, norms, ctx.references)
    per_run_table(finals, ctx.runs).to_csv(ctx.out / "final_returns.csv", index=False)
    ctx.found.update(normalizers=norms, finals=finals)
    return Files(data=["final_returns.csv"])


def _per_seed_curves(runs: Runs) -> pd.DataFrame:
    """Every run's curves of the score and the CURVES metrics it records, at most MAX_CURVE_POINTS evenly spaced
    logged updates per run (the last included): env, setting, [pretrain_seed,] seed, update, env_steps, metrics."""
    names = [runs.task.score, *(m for m, _ in CURVES if m in runs.curves and m != runs.task.score)]
    parts = []
    for _, run in runs.curves.groupby(["env", "setting", PRETRAIN_SEED, "seed"], sort=False):
        run = run.sort_values("update")
        keep = np.unique(np.linspace(0, len(run) - 1, min(MAX_CURVE_POINTS, len(run))).round().astype(int))
        parts.append(run.iloc[keep][["env", "setting", PRETRAIN_SEED, "seed", "update", "env_steps", *names]])
    return per_run_table(pd.concat(parts, ignore_index=True), runs)


def _run_curves(ctx: Context) -> Files:
    _per_seed_curves(ctx.runs).to_csv(ctx.out / "curves.csv", index=False, float_format="%.7g")
    return Files(data=["curves.csv"])


def _per_env(ctx: Context) -> Files:
    """per_env.csv and final_return.{md,tex}: IQM [95% CI] per env x setting; the score matrices for aggregates."""
    finals, found = ctx.found["finals"], ctx.found
    raw = intervals.per_env(finals, "final_return", ctx.reps, ctx.seed, ctx.min_seeds)
    scored = intervals.per_env(finals, "score", ctx.reps, ctx.seed, ctx.min_seeds)
    per_env = raw.merge(scored, on=["env", "setting", "runs", "diverged", "few_seeds"], suffixes=("", "_score"))
    per_env.to_csv(ctx.out / "per_env.csv", index=False)
    caption = (
        f"Final {ctx.runs.task.score_label} (mean over the last {ctx.last_percent:g}% of updates): IQM over seeds "
        f"[95% CI{intervals.nested_label(finals)}]{'; ' + intervals.NO_CI_RULE.format(n=ctx.min_seeds) if raw['few_seeds'].any() else ''}."
    )
    (ctx.out / "final_return.md").write_text(tables.markdown(raw, ctx.settings, ctx.envs))
    (ctx.out / "final_return.tex").write_text(tables.latex(raw, ctx.settings, ctx.envs, caption))
    complete = [s for s in ctx.settings if set(finals.loc[finals["setting"] == s, "env"]) == set(ctx.envs)]
    scorable = finals[~(finals["diverged"] & finals["score"].isna())]  # diverged, no chance reference: left out
    found.update(raw=raw, scored=scored, per_env=per_env, complete=complete, scorable=scorable)
    found["matrices"] = {s: intervals.score_matrix(scorable, "score", s, ctx.envs) for s in complete}
    found["with_ci"] = not per_env.loc[per_env["setting"].isin(complete), "few_seeds"].any()
    return Files(data=["per_env.csv"], tables=["final_return.md", "final_return.tex"])


def _scorable_everywhere(ctx: Context) -> bool:
    """A setting run on every env, and every such setting's scores finite."""
    matrices = ctx.found["matrices"]
    return bool(matrices) and all(np.isfinite(m).all() for m in matrices.values())


def _aggregates(ctx: Context) -> Files:
    """aggregates.{csv,md,tex} and figure; with 2+ settings, P(setting > baseline); performance profiles."""
    found, out, reps, seed = ctx.found, ctx.out, ctx.reps, ctx.seed
    matrices, complete, with_ci = found["matrices"], found["complete"], found["with_ci"]
    diverged = found["finals"].groupby("setting", sort=False)["diverged"].agg(["sum", "size"])
    agg = intervals.aggregates(matrices, reps, seed, with_ci)
    agg["few_seeds"] = not with_ci
    agg["runs"] = agg["setting"].map(diverged["size"]).astype(int)
    agg["diverged"] = agg["setting"].map(diverged["sum"]).astype(int)
    agg.to_csv(out / "aggregates.csv", index=False)
    wide = agg.rename(columns={"value": "iqm", "metric": "env"})  # tables put metrics in the columns
    metrics, lower = list(intervals.AGGREGATES), ("Optimality gap",)
    (out / "aggregates.md").write_text(tables.markdown(wide, complete, metrics, lower_is_better=lower))
    caption = "Normalized score over all envs [95% CI]; optimality gap: lower is better."
    (out / "aggregates.tex").write_text(tables.latex(wide, complete, metrics, caption, lower_is_better=lower))
    data, drawn = ["aggregates.csv"], []
    found["aggregates"] = agg
    if len(matrices) > 1:
        iqms = agg[agg["metric"] == "IQM"].set_index("setting")["value"]
        chosen = ctx.baseline or str(iqms.idxmax())
        if chosen not in matrices:
            raise ReportError(f"--baseline {chosen!r} is not a setting run on every env; settings: {list(matrices)}.")
        poi = intervals.improvement(matrices, chosen, reps, seed, with_ci)
        poi.to_csv(out / "improvement.csv", index=False)
        data.append("improvement.csv")
        drawn += figures.improvement(poi, out, "improvement")
        found.update(improvement=poi, baseline=chosen)
    drawn += figures.interval_estimates(agg, complete, intervals.AGGREGATES, out, "aggregates")
    profiles = intervals.performance_profiles(matrices, TAUS, reps, seed, with_ci)
    drawn += figures.profiles(profiles, TAUS, complete, out, "profiles")
    return Files(data=data, tables=["aggregates.md", "aggregates.tex"], figures=drawn)


def _curves(runs: Runs, metric: str, reps: int, seed: int, min_seeds: int) -> dict:
    """{(env, setting): (env_steps[points], iqm[points], ci[2, points], per-seed values[seeds, points] where the
    cell has fewer than ``min_seeds`` seeds (no CI; the figure draws every seed) else None)}."""
    out = {}
    for (env, setting), rows in runs.curves.groupby(["env", "setting"], sort=False):
        table = rows.pivot_table(index=[PRETRAIN_SEED, "seed"], columns="env_steps", values=metric, dropna=False)
        steps = table.columns.to_numpy()
        keep = np.unique(np.linspace(0, len(steps) - 1, min(MAX_CURVE_POINTS, len(steps))).round().astype(int))
        values = table.to_numpy(float)[:, keep]
        iqm, ci = intervals.curve(values, reps, seed, min_seeds)
        out[(env, setting)] = (steps[keep], iqm, ci, values if len(values) < min_seeds else None)
    return out


def _learning_curves(ctx: Context) -> Files:
    """curves_return: the score; curves_METRIC: each of CURVES the runs record (IQM over seeds, 95% CI band)."""
    runs, drawn = ctx.runs, []
    drawn_metrics = [(runs.task.score, runs.task.score_label, "curves_return")]
    drawn_metrics += [(metric, label, f"curves_{metric}") for metric, label in CURVES if metric in runs.curves]
    for metric, label, name in drawn_metrics:
        curves = _curves(runs, metric, ctx.reps, ctx.seed, ctx.min_seeds)
        drawn += figures.learning_curves(
            curves, ctx.settings, ctx.envs, f"{label} (IQM)", ctx.out, name, runs.task.sample_unit
        )
    return Files(figures=drawn)


def grid_fields(settings: dict[str, dict], fields: list[str]) -> tuple[str, str] | None:
    """The two numeric fields of a full two-field grid (for a heat map), else None; a field equal to an earlier
    one in every setting (a zipped twin, e.g. clip_eps_high beside clip_eps_low) does not count."""
    fields = [
        f for i, f in enumerate(fields) if not any(all(v[f] == v[g] for v in settings.values()) for g in fields[:i])
    ]
    if len(fields) != 2 or not all(isinstance(v[f], (int, float)) for v in settings.values() for f in fields):
        return None
    a, b = fields
    if len(settings) != len({v[a] for v in settings.values()}) * len({v[b] for v in settings.values()}):
        return None
    return a, b


def _heatmap(ctx: Context) -> Files:
    """heatmap: the final return per cell of a two-field grid, one panel per env."""
    runs, raw = ctx.runs, ctx.found["raw"]
    row, col = grid_fields(runs.settings, runs.setting_fields)
    cells = raw.assign(
        row=[runs.settings[s][row] for s in raw["setting"]], col=[runs.settings[s][col] for s in raw["setting"]]
    )
    label = f"final {runs.task.score_label}"
    return Files(figures=figures.heatmap(cells, row, col, ctx.envs, ctx.out, "heatmap", label))


def _ticks(settings: dict[str, dict], fields: list[str]) -> tuple[list[str], str]:
    """Short x tick labels for the settings, and the axis label (the field with the most distinct values)."""
    if not fields:
        return list(settings), "setting"
    primary = max(fields, key=lambda f: len({json.dumps(v[f]) for v in settings.values()}))
    common = {
        f: Counter(json.dumps(v[f]) for v in settings.values()).most_common(1)[0][0] for f in fields if f != primary
    }
    ticks = []
    for values in settings.values():
        odd = [str(values[f]) for f in common if json.dumps(values[f]) != common[f]]
        value = values[primary]
        ticks.append(odd[0] if odd else (f"{value:g}" if isinstance(value, float) else str(value)))
    return ticks, primary


def _sensitivity(ctx: Context) -> Files:
    """sensitivity: the normalized final score per setting, one line per env and (with aggregates) all envs."""
    ticks, xlabel = _ticks(ctx.runs.settings, ctx.runs.setting_fields)
    columns = ["env", "setting", "iqm", "low", "high"]
    lines = ctx.found["scored"][columns]
    if "aggregates" in ctx.found:
        iqm = ctx.found["aggregates"][ctx.found["aggregates"]["metric"] == "IQM"]
        lines = pd.concat([lines, iqm.rename(columns={"value": "iqm"}).assign(env="all envs")[columns]])
    return Files(figures=figures.sensitivity(lines, ctx.settings, ticks, xlabel, ctx.out, "sensitivity"))


def _is_grid(ctx: Context) -> bool:
    return grid_fields(ctx.runs.settings, ctx.runs.setting_fields) is not None


FINAL_RETURNS = Section("final_returns", _final_returns)
RUN_CURVES = Section("run_curves", _run_curves)
PER_ENV = Section(
    "per_env",
    _per_env,
    titles={"final_return.md": "Final return per env (IQM over seeds [95% CI]; bold only where the CIs separate)"},
)
AGGREGATES = Section(
    "aggregates",
    _aggregates,
    applies=_scorable_everywhere,
    titles={
        "aggregates.md": "Normalized score over all envs (95% CIs; bold only where the CIs separate)",
        "aggregates": "Aggregate normalized scores over envs (95% CIs)",
        "improvement": "Probability of improvement over the baseline (95% CIs)",
        "profiles": "Performance profiles: fraction of runs above each normalized score (95% CI bands)",
    },
)
LEARNING_CURVES = Section(
    "learning_curves",
    _learning_curves,
    titles={
        "curves_return": "Learning curves: the score (IQM over seeds, 95% CI band)",
        "curves_entropy": "Policy entropy during training (IQM over seeds, 95% CI band)",
        "curves_sample_entropy": "Entropy of the sampling policy per response token (IQM over seeds, 95% CI band)",
        "curves_response_length": "Response length during training (IQM over seeds, 95% CI band)",
        "curves_kl_ref": "KL to the reference during training (IQM over seeds, 95% CI band)",
        "curves_length_correct": "Length of the correct responses during training (IQM over seeds, 95% CI band)",
        "curves_length_incorrect": "Length of the incorrect responses during training (IQM over seeds, 95% CI band)",
    },
)
HEATMAP = Section(
    "heatmap",
    _heatmap,
    applies=_is_grid,
    titles={"heatmap": "Heat map: final return per cell of the grid (IQM [95% CI])"},
)
SENSITIVITY = Section(
    "sensitivity",
    _sensitivity,
    applies=lambda ctx: not _is_grid(ctx) and len(ctx.settings) > 1,
    titles={
        "sensitivity": (
            "Sensitivity: normalized final score per setting (IQM, 95% CI), one line per env and all envs together"
        )
    },
)
