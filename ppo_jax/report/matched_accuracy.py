"""Runs compared where they are equally good, and the compute each setting spent (language-model sweeps).

A state (entropy, response length) read at the last update confounds the state
with how far each run got: a slower setting still has the entropy a faster one
spent. So, per run: the score (sampled pass@1 for lm) smoothed by a trailing
mean over ``WINDOW`` logged updates; the first logged update where it reaches the
threshold; the smoothed entropy and lengths there; the updates and the tokens
generated to get there. Beside them, what the whole run cost: optimizer steps
(``num_updates x update_epochs x num_minibatches``), tokens generated (the mean
response length over the logged updates x the updates x the sequences per update:
exact when every update is logged), and the area under the score curve (its mean
over the logged updates: a run that learns sooner has more).

Whether a run has plateaued, by a stated rule: the least-squares slope of its (unsmoothed) score over the last
``TAIL`` of its logged updates, with a 95% t interval; a run whose interval lies above 0 is **still rising**
(it had not plateaued when it stopped), the others count as plateaued at that resolution.

The threshold is ``--matched-score``, or by default the highest multiple of 0.05
that at least 3 in 4 runs of every setting reach (a level every setting gets to).
Per setting: IQM [95% CI] over the runs that reached it (hierarchical over SFT
models where there are several), and how many did.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from ppo_jax.report import metric_tables, tables
from ppo_jax.report.sections import Context, Files, Section
from ppo_jax.report.sources import Runs, each_run, per_run_table

WINDOW = 5
"""Logged updates in the trailing mean of the score and of the state."""
STATE = ("sample_entropy", "response_length", "length_correct", "length_incorrect")
"""The state read where a run reaches the threshold (those the runs record)."""
REACH = ("updates_to", "tokens_to", *(f"{name}_at" for name in STATE))
COST = ("auc", "optimizer_steps", "tokens")
TAIL = 0.2
"""Share of a run's logged updates (at least 3) over which the plateau rule fits its final slope."""


def still_rising(score: np.ndarray, share: float = TAIL) -> tuple[float, float]:
    """(slope per logged update, lower end of its 95% t interval) of least squares of ``score`` on its index over
    the last ``share`` of the points (at least 3; NaN entries left out)."""
    tail = np.asarray(score, float)[-max(3, int(round(share * len(score)))) :]
    index = np.arange(len(tail))[np.isfinite(tail)]
    tail = tail[np.isfinite(tail)]
    if len(tail) < 3 or np.all(tail == tail[0]):
        return 0.0, 0.0
    fit = stats.linregress(index, tail)
    return float(fit.slope), float(fit.slope - stats.t.ppf(0.975, len(tail) - 2) * fit.stderr)


def applies(runs: Runs) -> bool:
    """Runs of a task that records the sampling entropy and the response length beside its score (lm)."""
    return {"sample_entropy", "response_length", runs.task.score} <= set(runs.curves.columns)


def smoothed(values: np.ndarray) -> np.ndarray:
    """``[T]``: the trailing mean over ``WINDOW`` entries (fewer at the start), NaN-aware."""
    return pd.Series(values).rolling(WINDOW, min_periods=1).mean().to_numpy()


def _per_update(config: dict) -> tuple[int, int]:
    """(sequences sampled, optimizer steps) per update of a setting's config."""
    sequences = int(config.get("num_prompts", 0)) * int(config.get("group_size", 1))
    return sequences, int(config.get("update_epochs", 1)) * int(config.get("num_minibatches", 1))


def per_run(runs: Runs, threshold: float) -> pd.DataFrame:
    """One row per run: its identity, ``reached``, the ``REACH`` columns (NaN where it did not) and ``COST``."""
    rows = []
    for run in each_run(runs):
        curves = run.curves
        sequences, steps = _per_update(runs.configs.get(run.setting, {}))
        score = smoothed(curves[runs.task.score].to_numpy(float))
        length = curves["response_length"].to_numpy(float)
        updates = curves["update"].to_numpy() + 1  # updates done at each logged row
        hit = np.flatnonzero(score >= threshold)
        row = {**run.identity, "reached": bool(hit.size) and not run.diverged}
        row.update(dict.fromkeys(REACH, np.nan))
        if row["reached"]:
            i = hit[0]
            row["updates_to"] = float(updates[i])
            row["tokens_to"] = float(np.nanmean(length[: i + 1]) * updates[i] * sequences)
            for name in STATE:
                if name in curves:
                    row[f"{name}_at"] = float(smoothed(curves[name].to_numpy(float))[i])
        slope, low = still_rising(curves[runs.task.score].to_numpy(float))
        row["final_slope"], row["still_rising"] = slope, bool(low > 0) and not run.diverged
        row["auc"] = np.nan if run.diverged else float(np.nanmean(curves[runs.task.score].to_numpy(float)))
        row["optimizer_steps"] = float(updates[-1] * steps)
        row["tokens"] = float(np.nanmean(length) * updates[-1] * sequences)
        rows.append(row)
    return pd.DataFrame(rows)


def auto_threshold(runs: Runs) -> float:
    """The highest multiple of 0.05 that at least 3 in 4 runs of every setting reach (smoothed score); 0 if none."""
    best = []
    for run in each_run(runs):
        if not run.diverged:
            best.append((run.setting, np.nanmax(smoothed(run.curves[runs.task.score].to_numpy(float)))))
    if not best:
        return 0.0
    table = pd.DataFrame(best, columns=["setting", "best"])
    level = table.groupby("setting")["best"].quantile(0.25).min()  # 3 in 4 runs of the weakest setting reach it
    return float(np.floor(level / 0.05 + 1e-9) * 0.05)


def summary(runs_table: pd.DataFrame, reps: int, seed: int, min_seeds: int) -> pd.DataFrame:
    """Per env x setting: ``reached`` of ``runs``, and IQM [95% CI] of the ``REACH`` columns over the runs that
    reached the threshold and of ``COST`` over the runs that did not diverge."""
    counts = runs_table.groupby(["env", "setting"], sort=False).agg(
        runs=("seed", "size"), reached=("reached", "sum"), still_rising=("still_rising", "sum")
    )
    reached = runs_table[runs_table["reached"]].assign(diverged=False)
    names = [n for n in REACH if reached[n].notna().any()] if len(reached) else []
    cost = metric_tables.summarise(runs_table, list(COST), reps, seed, min_seeds).drop(
        columns=["runs", "diverged", "few_seeds"]
    )
    out = counts.reset_index().merge(cost, on=["env", "setting"], how="left")
    if names:
        at = metric_tables.summarise(reached, names, reps, seed, min_seeds).drop(
            columns=["runs", "diverged", "few_seeds"]
        )
        out = out.merge(at, on=["env", "setting"], how="left")
    return out


LABELS = {
    "updates_to": "updates to reach",
    "tokens_to": "tokens to reach",
    "sample_entropy_at": "entropy there",
    "response_length_at": "length there",
    "length_correct_at": "right length there",
    "length_incorrect_at": "wrong length there",
    "auc": "mean score (AUC)",
    "optimizer_steps": "optimizer steps",
    "tokens": "tokens generated",
}


def markdown(table: pd.DataFrame, threshold: float, score_label: str) -> str:
    """The table, one row per env x setting, under a line that states the threshold and the smoothing."""
    names = [n for n in (*REACH, *COST) if n in table.columns]
    lines = [
        f"Threshold: {score_label or 'score'} {threshold:.2f}, smoothed over {WINDOW} logged updates; "
        "IQM [95% CI] over the runs that reached it (AUC and compute: over every run that did not diverge). "
        f"Still rising: runs whose least-squares slope of the score over their last {TAIL:.0%} of logged updates has "
        "a 95% interval above 0 (not plateaued when they stopped).",
        "",
        "| env | setting | reached | still rising | " + " | ".join(LABELS[n] for n in names) + " |",
        "|---|---|---:|---:|" + "---:|" * len(names),
    ]
    for row in table.to_dict("records"):
        cells = [tables.cell(row[n], row[n + "_low"], row[n + "_high"], row[n + "_per_seed"]) for n in names]
        lines.append(
            f"| {row['env']} | {row['setting']} | {row['reached']}/{row['runs']} | {row['still_rising']}/{row['runs']} | "
            + " | ".join(cells)
            + " |"
        )
    return "\n".join(lines) + "\n"


def _section(ctx: Context) -> Files:
    """matched_accuracy_runs.csv (per run), matched_accuracy.{csv,md} (per env x setting)."""
    threshold = ctx.matched_score if ctx.matched_score is not None else auto_threshold(ctx.runs)
    ctx.found["matched_score"] = threshold
    runs_table = per_run(ctx.runs, threshold)
    per_run_table(runs_table, ctx.runs).to_csv(ctx.out / "matched_accuracy_runs.csv", index=False)
    table = summary(runs_table, ctx.reps, ctx.seed, ctx.min_seeds).assign(threshold=threshold)
    table.to_csv(ctx.out / "matched_accuracy.csv", index=False)
    (ctx.out / "matched_accuracy.md").write_text(markdown(table, threshold, ctx.runs.task.score_label))
    return Files(data=["matched_accuracy_runs.csv", "matched_accuracy.csv"], tables=["matched_accuracy.md"])


SECTION = Section(
    "matched_accuracy",
    _section,
    applies=lambda ctx: applies(ctx.runs),
    titles={"matched_accuracy.md": "At matched accuracy, and the compute spent (IQM over seeds [95% CI])"},
)
