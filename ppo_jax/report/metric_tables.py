"""Tables of several metrics per env x setting: final values of the task's reported metrics, evaluation scores.

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
from ppo_jax.report.sources import Runs, each_run

DIAGNOSTICS = ("clip_fraction", "clip_low", "clip_high", "approx_kl")
"""Metrics of the update itself, tabled beside the reported ones where the runs record them: how often the clip
bound (PPO's fraction; lm's low and high sides apart) and how far the policy moved per update."""


def final_metrics(runs: Runs, last_percent: float) -> tuple[pd.DataFrame, list[str]]:
    """(one row per run: env, setting, seed, diverged, and the final value of each of ``Task.reported``'s
    metrics and of ``DIAGNOSTICS`` the runs record; those metrics' names)."""
    names = [m for m in (*runs.task.reported, *DIAGNOSTICS) if m in runs.curves.columns]
    names = list(dict.fromkeys(names))
    rows = []
    for run in each_run(runs):
        values = {
            m: np.nan if run.diverged else float(final_value(run.curves[m].to_numpy(), last_percent / 100))
            for m in names
        }
        rows.append({"env": run.env, "setting": run.setting, "seed": run.seed, "diverged": run.diverged, **values})
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
