"""The PPO paper's Table 1 beside ours (``ppo-jax report --normalize best-setting``).

Schulman et al. (2017), "Proximal Policy Optimization Algorithms", sec. 6.1 and
Table 1: per environment a random policy scores 0 and the best setting 1; a
setting's number is its normalized score averaged over environments (7 MuJoCo
tasks, 3 seeds each, 1M env steps). Ours is the same quantity: the report's
normalized scores with ``normalize="best-setting"`` (``scores.normalizers``:
random = the reference random policy, best = the best setting's mean final
return in the report) and their "Mean" aggregate (``intervals.aggregates``:
mean over envs of the mean over runs, 95% stratified-bootstrap CI).

How far our ranking of the settings agrees with the paper's (``rank_agreement``): Spearman's rho and Kendall's
tau-b between our mean over envs and the paper's number, over the settings the paper reports, with a 95%
percentile-bootstrap CI over seeds (runs resampled with replacement within each env x setting, the normalization
held fixed); no CI with too few seeds (``intervals.NO_CI_RULE``).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from ppo_jax.errors import ReportError
from ppo_jax.report import figures, tables
from ppo_jax.report.sections import Context, Files, Section

# Schulman et al. (2017), Table 1: average normalized score over 7 MuJoCo tasks (3 seeds each, 1M steps),
# keyed by (objective, its coefficient): clip_eps of clipping, d_targ (kl_target) of adaptive KL, beta of fixed KL.
PAPER_TABLE_1 = {
    ("unclipped", None): -0.39,
    ("clip", 0.1): 0.76,
    ("clip", 0.2): 0.82,
    ("clip", 0.3): 0.70,
    ("kl_adaptive", 0.003): 0.68,
    ("kl_adaptive", 0.01): 0.74,
    ("kl_adaptive", 0.03): 0.71,
    ("kl_fixed", 0.3): 0.62,
    ("kl_fixed", 1.0): 0.71,
    ("kl_fixed", 3.0): 0.72,
    ("kl_fixed", 10.0): 0.69,
}
COEFFICIENT = {"unclipped": None, "clip": "clip_eps", "kl_adaptive": "kl_target", "kl_fixed": "kl_beta"}
ALL_ENVS = "all envs: mean"
MIN_RANKED = 3
"""The fewest settings with a paper number for which a rank correlation is reported."""
PAPER = "PPO paper, Table 1"


def paper_score(config: dict) -> float | None:
    """The paper's Table 1 number for a PPO config (its objective and coefficient, constant clip range, no
    early stopping), or None where the paper has no such row."""
    if config["clip_schedule"] != "constant" or config["adaptive_clip"] or config["early_stop_kl"]:
        return None
    objective = config["objective"]
    if objective not in COEFFICIENT:
        return None
    field = COEFFICIENT[objective]
    return PAPER_TABLE_1.get((objective, None if field is None else round(float(config[field]), 4)))


def table(
    per_env: pd.DataFrame, aggregates: pd.DataFrame, settings: list[str], envs: list[str], configs: dict[str, dict]
) -> pd.DataFrame:
    """Long table for ``tables.markdown`` (env = column, setting, iqm = the value, low, high), per setting:
    each env's normalized score (``per_env``'s mean over seeds, ``mean_score``; no interval, so never bold), the
    "Mean" aggregate over envs [95% CI] (``few_seeds``: none), the paper's number."""
    rows = []
    means = per_env.set_index(["env", "setting"])["mean_score"]
    for setting in settings:
        for env in envs:
            rows.append(
                {"env": env, "setting": setting, "iqm": means[(env, setting)], "low": math.nan, "high": math.nan}
            )
        mean = aggregates[(aggregates["setting"] == setting) & (aggregates["metric"] == "Mean")].iloc[0]
        rows.append(
            {
                "env": ALL_ENVS,
                "setting": setting,
                "iqm": mean["value"],
                "low": mean["low"],
                "high": mean["high"],
                "few_seeds": bool(mean.get("few_seeds", False)),
            }
        )
        paper = paper_score(configs[setting])
        if paper is not None:
            row = {"env": PAPER, "setting": setting, "iqm": paper, "low": math.nan, "high": math.nan}
            rows.append({**row, "text": f"{paper:.2f}"})  # as printed in the paper
    return pd.DataFrame(rows)


def _correlations(ours: np.ndarray, paper: np.ndarray) -> tuple[float, float]:
    return float(stats.spearmanr(ours, paper).statistic), float(stats.kendalltau(ours, paper).statistic)


def rank_agreement(
    finals: pd.DataFrame, settings: list[str], envs: list[str], configs: dict[str, dict], reps: int, seed: int, with_ci
) -> pd.DataFrame | None:
    """Spearman's rho and Kendall's tau-b between each setting's mean normalized score over envs (``finals``:
    one row per run with env, setting, score) and its Table 1 number, over the settings the paper reports; rows
    statistic, value, low, high (95% percentile bootstrap over runs within each env x setting; NaN without
    ``with_ci``), settings. None with fewer than ``MIN_RANKED`` such settings."""
    ranked = [s for s in settings if paper_score(configs[s]) is not None]
    if len(ranked) < MIN_RANKED:
        return None
    paper = np.array([paper_score(configs[s]) for s in ranked])
    cells = [
        [finals.loc[(finals.env == e) & (finals.setting == s), "score"].to_numpy(float) for e in envs] for s in ranked
    ]
    point = _correlations(np.array([np.mean([c.mean() for c in row]) for row in cells]), paper)
    low = high = (math.nan, math.nan)
    if with_ci:
        rng = np.random.default_rng(seed)
        draws = np.empty((reps, 2))
        for r in range(reps):
            means = [np.mean([rng.choice(c, size=len(c)).mean() for c in row]) for row in cells]
            draws[r] = _correlations(np.array(means), paper)
        low, high = np.nanpercentile(draws, 2.5, axis=0), np.nanpercentile(draws, 97.5, axis=0)
    return pd.DataFrame(
        {
            "statistic": ["Spearman rho", "Kendall tau-b"],
            "value": point,
            "low": low,
            "high": high,
            "settings": len(ranked),
        }
    )


def agreement_text(agreement: pd.DataFrame | None, min_seeds: int) -> str:
    """One sentence on ``rank_agreement``'s table, or on why there is none."""
    if agreement is None:
        return f"Rank agreement with the paper: not computed (fewer than {MIN_RANKED} settings have a paper number).\n"
    parts = [tables.cell(r.value, r.low, r.high, few_seeds=bool(np.isnan(r.low))) for r in agreement.itertuples()]
    note = (
        "95% bootstrap CIs over seeds"
        if np.isfinite(agreement["low"]).all()
        else f"no CI: fewer than {min_seeds} seeds per cell"
    )
    return (
        f"Rank agreement with the paper over the {int(agreement['settings'].iloc[0])} settings it reports: "
        f"Spearman rho = {parts[0]}, Kendall tau-b = {parts[1]} ({note}).\n"
    )


def write(
    out: Path, long: pd.DataFrame, settings: list[str], envs: list[str], norms: dict, agreement: str = ""
) -> tuple[list[str], list[str]]:
    """Write ``paper_table1.{md,tex}`` and its figure ``paper_table1.{png,pdf}`` from ``table``'s ``long``;
    ``norms``: env -> (random, best, source); ``agreement``: ``agreement_text``, written below the table. Returns
    (table files, figure files)."""
    columns = [*envs, ALL_ENVS, PAPER]
    bounds = "; ".join(f"{env} {tables.fmt(r)}, {tables.fmt(b)}" for env, (r, b, _) in norms.items())
    caption = (
        f"Normalized score as in Schulman et al. (2017, Table 1): random policy = 0, best setting = 1 per env "
        f"(random, best: {bounds}); per env the mean over seeds; all envs: their mean [95% CI]; "
        f"{PAPER}: 7 MuJoCo tasks, 3 seeds, 1M steps. {agreement}"
    )
    (out / "paper_table1.md").write_text(
        tables.markdown(long, settings, columns) + ("\n" + agreement if agreement else "")
    )
    (out / "paper_table1.tex").write_text(tables.latex(long, settings, columns, caption))
    ours = long[long["env"] == ALL_ENVS].rename(columns={"iqm": "value"})
    paper = long[long["env"] == PAPER].set_index("setting")["iqm"].to_dict()
    drawn = figures.paper_comparison(ours, paper, settings, out, "paper_table1")
    return ["paper_table1.md", "paper_table1.tex"], drawn


def _section(ctx: Context) -> Files:
    """paper_table1.{md,tex} and figure; paper_rank_agreement.csv where enough settings have a paper number."""
    found = ctx.found
    if "aggregates" not in found:
        raise ReportError(
            "--normalize best-setting: the PPO paper's Table 1 needs a setting with runs on every env "
            f"({', '.join(ctx.envs)}) and a finite final return in each run; there is none."
        )
    complete, configs = found["complete"], ctx.runs.configs
    long = table(found["per_env"], found["aggregates"], complete, ctx.envs, configs)
    agreement = rank_agreement(found["scorable"], complete, ctx.envs, configs, ctx.reps, ctx.seed, found["with_ci"])
    data = []
    if agreement is not None:
        agreement.to_csv(ctx.out / "paper_rank_agreement.csv", index=False)
        data.append("paper_rank_agreement.csv")
    text = agreement_text(agreement, ctx.min_seeds)
    written, drawn = write(ctx.out, long, complete, ctx.envs, found["normalizers"], text)
    return Files(data=data, tables=written, figures=drawn)


SECTION = Section(
    "paper_table1",
    _section,
    applies=lambda ctx: ctx.normalize == "best-setting",
    titles={
        "paper_table1.md": (
            "The PPO paper's Table 1 (Schulman et al. 2017): normalized score per env (mean over "
            "seeds) and over all envs (mean [95% CI]) beside the paper's (7 MuJoCo tasks, 3 seeds, 1M steps), "
            "and the rank agreement of the two"
        ),
        "paper_table1": "The PPO paper's Table 1 beside ours: normalized score over envs (mean, 95% CI)",
    },
)
