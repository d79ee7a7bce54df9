"""The reward vs KL-to-reference frontier of language-model runs (Stiennon et al. 2020, fig. 5; Gao et al. 2022, fig. 1).

Per setting: the final KL(pi || pi_ref) per response (``kl_ref``) and two scores
(``panels``): for the rlhf task the reward-model score (``score``) and the
programmatic score (``true_score``); for the lm task the reward the advantages
used (``reward``) and sampled pass@1 (``accuracy``); each the mean over seeds of the runs' final values (mean over
the report's last percent of updates) with a 95% percentile-bootstrap CI over
seeds (``ppo_jax.final_values.seed_ci``; over pretrained models x seeds, ``hierarchical_ci``, where the runs
start from several; with fewer seeds than the report's
``min_seeds``, no CI and the per-seed values, ``intervals.NO_CI_RULE``); a diverged run has no final values
and is counted in ``diverged`` (the means are over the others). The figure puts KL on x and the
two scores on y, one series per value of a second swept field (the clip range
or the preset when swept), points in order of the first (beta when swept); a gap
between the reward model's score and the programmatic one is over-optimisation of the proxy.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ppo_jax.final_values import final_value, hierarchical_ci, seed_ci
from ppo_jax.report import figures, intervals, tables
from ppo_jax.report.sections import Context, Files, Section
from ppo_jax.report.sources import Runs, each_run

PANEL_CHOICES = (
    (("score", "reward-model score"), ("true_score", "programmatic score")),  # rlhf
    (("reward", "reward"), ("accuracy", "sampled pass@1")),  # lm
)


def panels(columns) -> tuple[tuple[str, str], ...]:
    """The two scores drawn against the KL: the first pair of PANEL_CHOICES the runs record; () if none."""
    for pair in PANEL_CHOICES:
        if all(metric in columns for metric, _ in pair):
            return pair
    return ()


def applies(runs: Runs) -> bool:
    """True for runs that record the KL to a reference and a pair of scores (the lm and rlhf tasks)."""
    return "kl_ref" in runs.curves.columns and bool(panels(runs.curves.columns))


def frontier_table(runs: Runs, last_percent: float, min_seeds: int = intervals.MIN_SEEDS) -> pd.DataFrame:
    """One row per setting: its swept values, seeds, diverged (seeds), and per metric ``m``: ``m``, ``m_ci95_low``,
    ``m_ci95_high``, ``m_per_seed`` (over the seeds that did not diverge; per-seed values instead of a CI with
    fewer than ``min_seeds`` of them)."""
    rows = []
    metrics = ("kl_ref", *(metric for metric, _ in panels(runs.curves.columns)))
    cells: dict[tuple[str, str], list] = {}
    for run in each_run(runs):
        cells.setdefault((run.env, run.setting), []).append(run)
    for (env, setting), seed_runs in cells.items():
        per_seed = {
            m: [
                np.nan if r.diverged else float(final_value(r.curves[m].to_numpy(), last_percent / 100))
                for r in seed_runs
            ]
            for m in metrics
        }
        row = {"env": env, "setting": setting, **runs.settings[setting], "seeds": len(seed_runs)}
        row["diverged"] = sum(r.diverged for r in seed_runs)
        for m, values in per_seed.items():
            models = [r.pretrain_seed for r in seed_runs]
            ci = hierarchical_ci(values, models) if len(set(models)) > 1 else seed_ci(values)
            row[m], row[f"{m}_ci95_low"], row[f"{m}_ci95_high"] = ci[:3]
            finite = np.asarray(values)[np.isfinite(values)]
            row[f"{m}_per_seed"] = intervals.per_seed_text(finite) if len(finite) < min_seeds else ""
            if len(finite) < min_seeds:
                row[f"{m}_ci95_low"] = row[f"{m}_ci95_high"] = np.nan
        rows.append(row)
    return pd.DataFrame(rows)


def _axes(fields: list[str]) -> tuple[str | None, str | None]:
    """(order field, series field): beta orders the points; the clip range, the preset or the KL estimator
    (unique per placement where kl_mode and kl_estimator are zipped) splits the series when swept."""
    order = "beta" if "beta" in fields else next((f for f in fields if f != "preset"), None)
    rest = [f for f in fields if f != order]
    preferred = [f for f in ("clip_eps", "clip_eps_high", "clip_eps_low", "preset", "kl_estimator") if f in rest]
    series = preferred[0] if preferred else (rest[0] if rest else None)
    return order, series


def plot(table: pd.DataFrame, fields: list[str], out: Path, name: str) -> list[str]:
    """Two panels (reward-model score, programmatic score) against the final KL; error bars are the 95% CIs."""
    import matplotlib.pyplot as plt

    order, series = _axes(fields)
    groups = list(table.groupby(series, sort=True)) if series else [(None, table)]
    colours = figures.colours(len(groups))
    with plt.rc_context(figures.STYLE):
        fig, axes = plt.subplots(1, 2, figsize=(figures.PANEL[0] * 2, figures.PANEL[1] * 1.2))
        for ax, (metric, label) in zip(axes, panels(table.columns), strict=True):
            for i, (value, group) in enumerate(groups):
                group = group.sort_values(order) if order else group
                x, y = group["kl_ref"].to_numpy(float), group[metric].to_numpy(float)
                xerr = np.abs(np.stack([x - group["kl_ref_ci95_low"], group["kl_ref_ci95_high"] - x]))
                yerr = np.abs(np.stack([y - group[f"{metric}_ci95_low"], group[f"{metric}_ci95_high"] - y]))
                ax.errorbar(
                    x,
                    y,
                    xerr=np.nan_to_num(xerr),
                    yerr=np.nan_to_num(yerr),
                    color=colours[i],
                    marker=figures.MARKERS[i % len(figures.MARKERS)],
                    markersize=4,
                    linewidth=1.0,
                    capsize=2,
                    label=f"{series} = {value:g}"
                    if isinstance(value, float)
                    else f"{series} = {value}"
                    if series
                    else None,
                )
                if i == 0 and order:
                    for xi, yi, v in zip(x, y, group[order], strict=True):
                        shown = f"{v:g}" if isinstance(v, (int, float)) else str(v)
                        ax.annotate(
                            f"{order}={shown}", (xi, yi), textcoords="offset points", xytext=(3, -9), fontsize=6
                        )
            ax.set_xlabel("KL(π ‖ π_ref) per response, final (nats)")
            ax.set_ylabel(f"{label}, final")
            ax.grid(alpha=0.3)
        if series:
            axes[0].legend()
        fig.tight_layout()
        return figures.save(fig, out, name)


def markdown(table: pd.DataFrame, fields: list[str]) -> str:
    """The frontier as a Markdown table: one row per setting, final values as mean [95% CI] over seeds."""

    def cell(row, m):
        return tables.cell(row[m], row[m + "_ci95_low"], row[m + "_ci95_high"], row.get(m + "_per_seed", ""))

    def seeds(row):
        diverged = int(row.get("diverged", 0))
        return f"{row['seeds']} ({diverged} diverged)" if diverged else str(row["seeds"])

    pair = panels(table.columns)
    head = [*fields, "seeds", "KL to reference (nats)", *(label for _, label in pair)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for _, row in table.iterrows():
        values = [f"{row[f]:g}" if isinstance(row[f], float) else str(row[f]) for f in fields]
        lines.append(
            "| "
            + " | ".join([*values, seeds(row), cell(row, "kl_ref"), *(cell(row, metric) for metric, _ in pair)])
            + " |"
        )
    return "\n".join(lines) + "\n"


def _section(ctx: Context) -> Files:
    """frontier.{csv,md} and figure."""
    fields = ctx.runs.setting_fields
    table = frontier_table(ctx.runs, ctx.last_percent, ctx.min_seeds)
    table.to_csv(ctx.out / "frontier.csv", index=False)
    (ctx.out / "frontier.md").write_text(markdown(table, fields))
    return Files(data=["frontier.csv"], tables=["frontier.md"], figures=plot(table, fields, ctx.out, "frontier"))


SECTION = Section(
    "frontier",
    _section,
    applies=lambda ctx: applies(ctx.runs),
    titles={
        "frontier.md": "Reward vs KL to the reference (final values; mean over seeds [95% CI])",
        "frontier": "Reward vs KL to the reference: final values per setting (mean over seeds, 95% CIs)",
    },
)
