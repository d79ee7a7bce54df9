"""Tables of several metrics per env x setting: final values of the task's reported metrics, evaluation scores;
and the report's sections that write them (``EVALUATION``, ``FINAL_METRICS``, ``EVALUATION_SCORES``).

Each cell is the IQM over seeds with rliable's 95% stratified-bootstrap CI (``intervals.per_env``; per-seed
values instead with too few seeds, ``intervals.NO_CI_RULE``). A run's
final value of a metric is its mean over the report's last percent of logged updates (``final_values.final_value``);
a diverged run has none (NaN, counted in ``diverged`` and left out of the statistics).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ppo_jax.final_values import final_value
from ppo_jax.report import intervals, tables
from ppo_jax.report.sections import Context, Files, Section
from ppo_jax.report.sources import Runs, each_run, per_run_table

DIAGNOSTICS = ("clip_fraction", "clip_low", "clip_high", "approx_kl")
"""Metrics of the update itself, tabled beside the reported ones where the runs record them: how often the clip
bound (PPO's fraction; lm's low and high sides apart) and how far the policy moved per update."""


def reported(runs: Runs) -> list[str]:
    """The metrics of ``Task.reported`` and of ``DIAGNOSTICS`` the runs record, in that order, once each."""
    return list(dict.fromkeys(m for m in (*runs.task.reported, *DIAGNOSTICS) if m in runs.curves.columns))


def final_metrics(runs: Runs, last_percent: float) -> tuple[pd.DataFrame, list[str]]:
    """(one row per run: env, setting, seed, diverged, and the final value of each ``reported`` metric; their
    names)."""
    names = reported(runs)
    rows = []
    for run in each_run(runs):
        values = {
            m: np.nan if run.diverged else float(final_value(run.curves[m].to_numpy(), last_percent / 100))
            for m in names
        }
        rows.append({**run.identity, **values})
    return pd.DataFrame(rows), names


def summarise(
    per_run: pd.DataFrame, names: list[str], reps: int, seed: int, min_seeds: int = intervals.MIN_SEEDS
) -> pd.DataFrame:
    """Per env x setting: runs, diverged, few_seeds, and per metric ``m``: ``m`` (IQM), ``m_low``, ``m_high``,
    ``m_mean``, ``m_per_seed``."""
    out = None
    for name in names:
        stats = intervals.per_env(per_run, name, reps, seed, min_seeds).rename(
            columns={
                "iqm": name,
                "low": f"{name}_low",
                "high": f"{name}_high",
                "mean": f"{name}_mean",
                "per_seed": f"{name}_per_seed",
            }
        )
        out = stats if out is None else out.merge(stats, on=["env", "setting", "runs", "diverged", "few_seeds"])
    return out


def markdown(table: pd.DataFrame, names: list[str]) -> str:
    """One row per env x setting, one column per metric: ``IQM [low, high]`` (``tables.cell``)."""
    lines = ["| env | setting | " + " | ".join(names) + " |", "|---|---|" + "---:|" * len(names)]
    for row in table.to_dict("records"):
        note = f" ({row['diverged']}/{row['runs']} diverged)" if row["diverged"] else ""
        cells = [tables.cell(row[n], row[n + "_low"], row[n + "_high"], row[n + "_per_seed"]) for n in names]
        lines.append(f"| {row['env']} | {row['setting']}{note} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _evaluation(ctx: Context) -> Files:
    """evaluation.md: mean evaluation return per env x setting (stochastic, deterministic policy) beside the
    training final return; a diverged run is counted, not evaluated."""
    lines = [
        "| env | setting | stochastic policy | deterministic policy | training final return |",
        "|---|---|---:|---:|---:|",
    ]
    for (env, setting), rows in ctx.found["finals"].groupby(["env", "setting"], sort=False):
        kept = rows[~rows["diverged"]]  # a diverged run's parameters are not finite: not evaluated
        note = f" ({len(rows) - len(kept)}/{len(rows)} diverged)" if len(kept) < len(rows) else ""
        lines.append(
            f"| {env} | {setting}{note} | {tables.fmt(kept['eval_return_stochastic'].mean())} | "
            f"{tables.fmt(kept['eval_return_deterministic'].mean())} | {tables.fmt(kept['final_return'].mean())} |"
        )
    (ctx.out / "evaluation.md").write_text("\n".join(lines) + "\n")
    return Files(tables=["evaluation.md"])


def _final_metrics(ctx: Context) -> Files:
    """final_metrics_runs.csv (per run), final_metrics.{csv,md} (IQM [95% CI] per env x setting)."""
    per_run, names = final_metrics(ctx.runs, ctx.last_percent)
    per_run_table(per_run, ctx.runs).to_csv(ctx.out / "final_metrics_runs.csv", index=False)
    table = summarise(per_run, names, ctx.reps, ctx.seed, ctx.min_seeds)
    table.to_csv(ctx.out / "final_metrics.csv", index=False)
    (ctx.out / "final_metrics.md").write_text(markdown(table, names))
    return Files(data=["final_metrics_runs.csv", "final_metrics.csv"], tables=["final_metrics.md"])


def _scored_evals(ctx: Context) -> list[str]:
    """The task's evaluation scores the runs record, evaluation returns aside (lm: pass@1, pass@G, the pass@k that
    were drawn: a column all NaN is left out)."""
    finals = ctx.found["finals"]
    names = ctx.runs.task.eval_names
    return [c for c in names if c in finals and not c.startswith("eval_return_") and finals[c].notna().any()]


def _evaluation_scores(ctx: Context) -> Files:
    """evaluation_scores.{csv,md}: IQM [95% CI] of each evaluation score per env x setting."""
    names = _scored_evals(ctx)
    table = summarise(ctx.found["finals"], names, ctx.reps, ctx.seed, ctx.min_seeds)
    table.to_csv(ctx.out / "evaluation_scores.csv", index=False)
    (ctx.out / "evaluation_scores.md").write_text(markdown(table, names))
    return Files(data=["evaluation_scores.csv"], tables=["evaluation_scores.md"])


EVALUATION = Section(
    "evaluation",
    _evaluation,
    applies=lambda ctx: "eval_return_stochastic" in ctx.found["finals"],
    titles={"evaluation.md": "Evaluation of the final parameters (mean over seeds)"},
)
FINAL_METRICS = Section(
    "final_metrics",
    _final_metrics,
    applies=lambda ctx: len(reported(ctx.runs)) > 1,  # the score and more (lm: entropy, length, KL to the reference)
    titles={"final_metrics.md": "Final values of the reported metrics (IQM over seeds [95% CI])"},
)
EVALUATION_SCORES = Section(
    "evaluation_scores",
    _evaluation_scores,
    applies=lambda ctx: bool(_scored_evals(ctx)),
    titles={"evaluation_scores.md": "Evaluation of the final parameters on fresh prompts (IQM over seeds [95% CI])"},
)
