"""Cui et al.'s entropy-performance law R = -a exp(H) + b, fitted to each run of a language-model sweep.

Cui et al. (2025), "The Entropy Mechanism of Reinforcement Learning for Reasoning
Language Models", eq. (1): over an RL run, validation accuracy R and policy entropy
H follow R = -a exp(H) + b, so performance is bought with entropy and
R(H = 0) = b - a is the ceiling once the entropy is spent.

Here, per run: ordinary least squares of R_t on x_t = exp(H_t) over its logged
updates, with H_t the entropy of the sampling policy over update t's response
tokens (``sample_entropy``) and R_t the task's score on the same samples
(sampled pass@1 for lm): R = b - a x. Per setting: IQM over seeds of a, b and
b - a with rliable's 95% stratified bootstrap CI (``intervals.per_env``), and
the median R^2 of the runs' fits. A diverged run, or one whose entropy does
not move (fewer than 3 finite points or no spread in x), has no fit (NaN) and
is counted in ``runs`` but left out of the statistics.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ppo_jax.report import figures, intervals, tables
from ppo_jax.report.sections import Context, Files, Section
from ppo_jax.report.sources import Runs, each_run, per_run_table

ENTROPY = "sample_entropy"
PARAMETERS = (("a", "a"), ("b", "b"), ("ceiling", "b - a (R at H = 0)"))


def applies(runs: Runs) -> bool:
    """True for runs that record the sampling policy's entropy beside their score (the lm and rlhf tasks)."""
    return ENTROPY in runs.curves.columns and runs.task.score in runs.curves.columns


def fit(entropy: np.ndarray, score: np.ndarray) -> tuple[float, float, float]:
    """``(a, b, r2)`` of the least-squares fit ``score = b - a * exp(entropy)`` over the finite points of two ``[T]``
    arrays; NaNs when fewer than 3 points are finite or exp(entropy) does not vary."""
    x, y = np.exp(np.asarray(entropy, float)), np.asarray(score, float)
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    if len(x) < 3 or np.ptp(x) == 0:
        return np.nan, np.nan, np.nan
    slope, intercept = np.polyfit(x, y, 1)
    residual = y - (intercept + slope * x)
    total = ((y - y.mean()) ** 2).sum()
    r2 = 1.0 - (residual**2).sum() / total if total > 0 else np.nan
    return float(-slope), float(intercept), float(r2)


def fit_runs(runs: Runs) -> pd.DataFrame:
    """One row per run: env, setting, seed, diverged, a, b, ceiling (= b - a), r2, points (updates fitted)."""
    rows = []
    for run in each_run(runs):
        curves = run.curves
        a, b, r2 = (
            (np.nan,) * 3 if run.diverged else fit(curves[ENTROPY].to_numpy(), curves[runs.task.score].to_numpy())
        )
        rows.append(
            {
                **run.identity,
                "a": a,
                "b": b,
                "ceiling": b - a,
                "r2": r2,
                "points": len(curves),
            }
        )
    return pd.DataFrame(rows)


def summary(per_run: pd.DataFrame, reps: int, seed: int, min_seeds: int = intervals.MIN_SEEDS) -> pd.DataFrame:
    """Per env x setting: runs, fitted (runs with a fit), median r2, and for a, b, ceiling: IQM [95% CI] over seeds
    (per-seed values ``m_per_seed`` instead of a CI with fewer than ``min_seeds`` fits)."""
    fitted = per_run[np.isfinite(per_run["a"])].assign(diverged=False)
    counts = per_run.groupby(["env", "setting"], sort=False).agg(
        runs=("seed", "size"), fitted=("a", lambda a: int(np.isfinite(a).sum())), median_r2=("r2", "median")
    )
    if fitted.empty:  # no run has 3 finite points to fit (e.g. runs of 2 updates): every parameter NaN
        columns = [f"{name}{end}" for name, _ in PARAMETERS for end in ("", "_low", "_high", "_per_seed")]
        return counts.reset_index().assign(**dict.fromkeys(columns, np.nan))
    out = None
    for name, _ in PARAMETERS:
        stats = intervals.per_env(fitted, name, reps, seed, min_seeds).drop(
            columns=["runs", "diverged", "mean", "few_seeds"]
        )
        stats = stats.rename(
            columns={"iqm": name, "low": f"{name}_low", "high": f"{name}_high", "per_seed": f"{name}_per_seed"}
        )
        out = stats if out is None else out.merge(stats, on=["env", "setting"])
    return counts.reset_index().merge(out, on=["env", "setting"], how="left")


def markdown(table: pd.DataFrame) -> str:
    """The summary as a Markdown table: one row per env x setting."""
    head = ["env", "setting", "runs fitted", *(label for _, label in PARAMETERS), "median R^2"]
    lines = ["| " + " | ".join(head) + " |", "|---|---|---:|" + "---:|" * (len(PARAMETERS) + 1)]
    for row in table.itertuples():
        cells = [
            tables.cell(
                getattr(row, n), getattr(row, n + "_low"), getattr(row, n + "_high"), getattr(row, n + "_per_seed")
            )
            for n, _ in PARAMETERS
        ]
        lines.append(
            f"| {row.env} | {row.setting} | {row.fitted}/{row.runs} | {' | '.join(cells)} | {tables.fmt(row.median_r2)} |"
        )
    return "\n".join(lines) + "\n"


def plot(runs: Runs, table: pd.DataFrame, out: Path, name: str) -> list[str]:
    """Score against entropy, every logged update of every run (one colour per setting), and each setting's law
    with its IQM a and b; one panel per env."""
    import matplotlib.pyplot as plt

    envs = list(dict.fromkeys(table["env"]))
    settings = list(dict.fromkeys(table["setting"]))
    palette = dict(zip(settings, figures.colours(len(settings)), strict=True))
    with plt.rc_context(figures.STYLE):
        fig, axes = figures.panel_grid(len(envs))
        for ax, env in zip(axes, envs, strict=False):
            for row in table[table["env"] == env].itertuples():
                points = runs.curves[(runs.curves["env"] == env) & (runs.curves["setting"] == row.setting)]
                h, r = points[ENTROPY].to_numpy(float), points[runs.task.score].to_numpy(float)
                ax.scatter(h, r, s=2, alpha=0.25, color=palette[row.setting], linewidths=0)
                if np.isfinite(row.a):
                    grid = np.linspace(np.nanmin(h), np.nanmax(h), 50)
                    ax.plot(grid, row.b - row.a * np.exp(grid), color=palette[row.setting], label=row.setting)
            ax.set(title=env, xlabel="entropy of the sampling policy (nats/token)", ylabel=runs.task.score_label)
        axes[0].legend(frameon=False)
        return figures.save(fig, out, name)


def _section(ctx: Context) -> Files:
    """entropy_fit_runs.csv (per run), entropy_fit.{csv,md} (per env x setting) and figure."""
    per_run = fit_runs(ctx.runs)
    per_run_table(per_run, ctx.runs).to_csv(ctx.out / "entropy_fit_runs.csv", index=False)
    table = summary(per_run, ctx.reps, ctx.seed, ctx.min_seeds)
    table.to_csv(ctx.out / "entropy_fit.csv", index=False)
    (ctx.out / "entropy_fit.md").write_text(markdown(table))
    return Files(
        data=["entropy_fit_runs.csv", "entropy_fit.csv"],
        tables=["entropy_fit.md"],
        figures=plot(ctx.runs, table, ctx.out, "entropy_fit"),
    )


SECTION = Section(
    "entropy_fit",
    _section,
    applies=lambda ctx: applies(ctx.runs),
    titles={
        "entropy_fit.md": (
            "Entropy-performance law R = -a exp(H) + b (Cui et al. 2025) fitted per run: IQM over seeds [95% CI]"
        ),
        "entropy_fit": "Score against the sampling policy's entropy: every logged update, and each setting's fitted law",
    },
)
