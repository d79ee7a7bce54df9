"""``make_report``: run and sweep directories -> a report directory of statistics, figures and tables.

    from ppo_jax.report import make_report
    make_report(["runs/clip_eps_quick"], "reports/clip_eps_quick")

Report directory::

    index.md, index.html      everything below, with definitions and provenance
    report.json               parameters, reference scores, sources (spec, commit, versions, hardware, command)
    final_returns.csv         one row per run: final return, normalized score, evaluation returns
    curves.csv                per run: the score and the curves drawn, at <= MAX_CURVE_POINTS logged updates
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
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd

from ppo_jax.errors import ReportError
from ppo_jax.final_values import NON_FINITE
from ppo_jax.report import entropy_fit, figures, frontier, intervals, metric_tables, paper_table1, scores, tables
from ppo_jax.report.index import sources_line, stamp_tables, write_index
from ppo_jax.report.scores import NORMALIZATIONS, final_returns, load_reference_scores, normalizers
from ppo_jax.report.sources import Runs, load_sources
from ppo_jax.storage.atomic import absolute, check_out_dir, write_directory, write_json

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


def _grid_fields(settings: dict[str, dict], fields: list[str]) -> tuple[str, str] | None:
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


def _curves(runs: Runs, metric: str, reps: int, seed: int, min_seeds: int) -> dict:
    """{(env, setting): (env_steps[points], iqm[points], ci[2, points], per-seed values[seeds, points] where the
    cell has fewer than ``min_seeds`` seeds (no CI; the figure draws every seed) else None)}."""
    out = {}
    for (env, setting), rows in runs.curves.groupby(["env", "setting"], sort=False):
        table = rows.pivot_table(index="seed", columns="env_steps", values=metric, dropna=False)
        steps = table.columns.to_numpy()
        keep = np.unique(np.linspace(0, len(steps) - 1, min(MAX_CURVE_POINTS, len(steps))).round().astype(int))
        values = table.to_numpy(float)[:, keep]
        iqm, ci = intervals.curve(values, reps, seed, min_seeds)
        out[(env, setting)] = (steps[keep], iqm, ci, values if len(values) < min_seeds else None)
    return out


def _per_seed_curves(runs: Runs) -> pd.DataFrame:
    """Every run's curves of the score and the CURVES metrics it records, at most MAX_CURVE_POINTS evenly spaced
    logged updates per run (the last included): env, setting, seed, update, env_steps, metrics."""
    names = [runs.task.score, *(m for m, _ in CURVES if m in runs.curves and m != runs.task.score)]
    parts = []
    for _, run in runs.curves.groupby(["env", "setting", "seed"], sort=False):
        run = run.sort_values("update")
        keep = np.unique(np.linspace(0, len(run) - 1, min(MAX_CURVE_POINTS, len(run))).round().astype(int))
        parts.append(run.iloc[keep][["env", "setting", "seed", "update", "env_steps", *names]])
    return pd.concat(parts, ignore_index=True)


def _analyse(runs: Runs, out: Path, *, last_percent, reps, seed, baseline, references, normalize, min_seeds) -> dict:
    envs = list(dict.fromkeys(runs.curves["env"]))
    settings = list(runs.settings)
    finals = final_returns(runs, last_percent)
    if len(runs.evals):
        finals = finals.merge(runs.evals.drop(columns=["source"]), on=["env", "setting", "seed"], how="left")
    norms = normalizers(finals, references, normalize)
    finals["score"] = scores.normalize(finals, norms, references)
    finals.to_csv(out / "final_returns.csv", index=False)
    _per_seed_curves(runs).to_csv(out / "curves.csv", index=False, float_format="%.7g")

    raw = intervals.per_env(finals, "final_return", reps, seed, min_seeds)
    scored = intervals.per_env(finals, "score", reps, seed, min_seeds)
    per_env = raw.merge(scored, on=["env", "setting", "runs", "diverged", "few_seeds"], suffixes=("", "_score"))
    per_env.to_csv(out / "per_env.csv", index=False)
    files = {"data": ["final_returns.csv", "curves.csv", "per_env.csv"], "tables": [], "figures": []}

    caption = (
        f"Final {runs.task.score_label} (mean over the last {last_percent:g}% of updates): IQM over seeds [95% CI]"
        f"{'; ' + intervals.NO_CI_RULE.format(n=min_seeds) if raw['few_seeds'].any() else ''}."
    )
    (out / "final_return.md").write_text(tables.markdown(raw, settings, envs))
    (out / "final_return.tex").write_text(tables.latex(raw, settings, envs, caption))
    files["tables"] += ["final_return.md", "final_return.tex"]

    complete = [s for s in settings if set(finals.loc[finals["setting"] == s, "env"]) == set(envs)]
    scorable = finals[~(finals["diverged"] & finals["score"].isna())]  # diverged, no chance reference: left out
    matrices = {s: intervals.score_matrix(scorable, "score", s, envs) for s in complete}
    diverged = finals.groupby("setting", sort=False)["diverged"].agg(["sum", "size"])
    result = {
        "envs": envs,
        "settings": settings,
        "normalizers": norms,
        "finals": finals,
        "per_env": per_env,
        "files": files,
    }
    with_ci = not per_env.loc[per_env["setting"].isin(complete), "few_seeds"].any()
    if matrices and all(np.isfinite(m).all() for m in matrices.values()):
        agg = intervals.aggregates(matrices, reps, seed, with_ci)
        agg["few_seeds"] = not with_ci
        agg["runs"] = agg["setting"].map(diverged["size"]).astype(int)
        agg["diverged"] = agg["setting"].map(diverged["sum"]).astype(int)
        agg.to_csv(out / "aggregates.csv", index=False)
        wide = agg.rename(columns={"value": "iqm", "metric": "env"})  # tables put metrics in the columns
        (out / "aggregates.md").write_text(
            tables.markdown(wide, complete, list(intervals.AGGREGATES), lower_is_better=("Optimality gap",))
        )
        (out / "aggregates.tex").write_text(
            tables.latex(
                wide,
                complete,
                list(intervals.AGGREGATES),
                "Normalized score over all envs [95% CI]; optimality gap: lower is better.",
                lower_is_better=("Optimality gap",),
            )
        )
        files["data"].append("aggregates.csv")
        files["tables"] += ["aggregates.md", "aggregates.tex"]
        result["aggregates"] = agg
        if len(matrices) > 1:
            iqms = agg[agg["metric"] == "IQM"].set_index("setting")["value"]
            chosen = baseline or str(iqms.idxmax())
            if chosen not in matrices:
                raise ReportError(
                    f"--baseline {chosen!r} is not a setting run on every env; settings: {list(matrices)}."
                )
            poi = intervals.improvement(matrices, chosen, reps, seed, with_ci)
            poi.to_csv(out / "improvement.csv", index=False)
            files["data"].append("improvement.csv")
            files["figures"] += figures.improvement(poi, out, "improvement")
            result["improvement"] = poi
            result["baseline"] = chosen
        files["figures"] += figures.interval_estimates(agg, complete, intervals.AGGREGATES, out, "aggregates")
        files["figures"] += figures.profiles(
            intervals.performance_profiles(matrices, TAUS, reps, seed, with_ci), TAUS, complete, out, "profiles"
        )
    if normalize == "best-setting":
        if "aggregates" not in result:
            raise ReportError(
                "--normalize best-setting: the PPO paper's Table 1 needs a setting with runs on every env "
                f"({', '.join(envs)}) and a finite final return in each run; there is none."
            )
        long = paper_table1.table(per_env, result["aggregates"], complete, envs, runs.configs)
        agreement = paper_table1.rank_agreement(scorable, complete, envs, runs.configs, reps, seed, with_ci)
        if agreement is not None:
            agreement.to_csv(out / "paper_rank_agreement.csv", index=False)
            files["data"].append("paper_rank_agreement.csv")
        text = paper_table1.agreement_text(agreement, min_seeds)
        written, drawn = paper_table1.write(out, long, complete, envs, norms, text)
        files["tables"] += written
        files["figures"] += drawn

    if "eval_return_stochastic" in finals:
        lines = [
            "| env | setting | stochastic policy | deterministic policy | training final return |",
            "|---|---|---:|---:|---:|",
        ]
        for (env, setting), rows in finals.groupby(["env", "setting"], sort=False):
            kept = rows[~rows["diverged"]]  # a diverged run's parameters are not finite: not evaluated
            note = f" ({len(rows) - len(kept)}/{len(rows)} diverged)" if len(kept) < len(rows) else ""
            lines.append(
                f"| {env} | {setting}{note} | {tables.fmt(kept['eval_return_stochastic'].mean())} | "
                f"{tables.fmt(kept['eval_return_deterministic'].mean())} | {tables.fmt(kept['final_return'].mean())} |"
            )
        (out / "evaluation.md").write_text("\n".join(lines) + "\n")
        files["tables"].append("evaluation.md")

    per_run, names = metric_tables.final_metrics(runs, last_percent)
    if len(names) > 1:  # the score and more (lm: entropy, response length, KL to the reference)
        per_run.to_csv(out / "final_metrics_runs.csv", index=False)
        table = metric_tables.summarise(per_run, names, reps, seed, min_seeds)
        table.to_csv(out / "final_metrics.csv", index=False)
        (out / "final_metrics.md").write_text(metric_tables.markdown(table, names))
        files["data"] += ["final_metrics_runs.csv", "final_metrics.csv"]
        files["tables"].append("final_metrics.md")
    scored_evals = [c for c in runs.task.eval_names if c in finals and not c.startswith("eval_return_")]
    if scored_evals:  # e.g. lm's pass@1 and pass@G on fresh prompts
        table = metric_tables.summarise(finals, scored_evals, reps, seed, min_seeds)
        table.to_csv(out / "evaluation_scores.csv", index=False)
        (out / "evaluation_scores.md").write_text(metric_tables.markdown(table, scored_evals))
        files["data"].append("evaluation_scores.csv")
        files["tables"].append("evaluation_scores.md")

    label = runs.task.score_label
    files["figures"] += figures.learning_curves(
        _curves(runs, runs.task.score, reps, seed, min_seeds),
        settings,
        envs,
        f"{label} (IQM)",
        out,
        "curves_return",
        runs.task.sample_unit,
    )
    for metric, label in CURVES:
        if metric in runs.curves:
            files["figures"] += figures.learning_curves(
                _curves(runs, metric, reps, seed, min_seeds),
                settings,
                envs,
                f"{label} (IQM)",
                out,
                f"curves_{metric}",
                runs.task.sample_unit,
            )
    if frontier.applies(runs):
        table = frontier.frontier_table(runs, last_percent, min_seeds)
        table.to_csv(out / "frontier.csv", index=False)
        (out / "frontier.md").write_text(frontier.markdown(table, runs.setting_fields))
        files["data"].append("frontier.csv")
        files["tables"].append("frontier.md")
        files["figures"] += frontier.plot(table, runs.setting_fields, out, "frontier")
    if entropy_fit.applies(runs):
        per_run = entropy_fit.fit_runs(runs)
        per_run.to_csv(out / "entropy_fit_runs.csv", index=False)
        table = entropy_fit.summary(per_run, reps, seed, min_seeds)
        table.to_csv(out / "entropy_fit.csv", index=False)
        (out / "entropy_fit.md").write_text(entropy_fit.markdown(table))
        files["data"] += ["entropy_fit_runs.csv", "entropy_fit.csv"]
        files["tables"].append("entropy_fit.md")
        files["figures"] += entropy_fit.plot(runs, table, out, "entropy_fit")
    grid = _grid_fields(runs.settings, runs.setting_fields)
    if grid is not None:
        cells = raw.assign(
            row=[runs.settings[s][grid[0]] for s in raw["setting"]],
            col=[runs.settings[s][grid[1]] for s in raw["setting"]],
        )
        files["figures"] += figures.heatmap(
            cells, grid[0], grid[1], envs, out, "heatmap", f"final {runs.task.score_label}"
        )
    elif len(settings) > 1:
        ticks, xlabel = _ticks(runs.settings, runs.setting_fields)
        lines = scored[["env", "setting", "iqm", "low", "high"]]
        if "aggregates" in result:
            iqm = result["aggregates"][result["aggregates"]["metric"] == "IQM"]
            lines = pd.concat(
                [
                    lines,
                    iqm.rename(columns={"value": "iqm"}).assign(env="all envs")[
                        ["env", "setting", "iqm", "low", "high"]
                    ],
                ]
            )
        files["figures"] += figures.sensitivity(lines, settings, ticks, xlabel, out, "sensitivity")
    return result


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
) -> Path:
    """Write a report for the runs in ``paths`` (run or sweep directories of one task) to ``out``; returns ``out``.

    ``last_percent``: the share of each run's last updates whose mean is its final
    value (default: the task's, ``Task.final_fraction``). ``normalize``: "reference"
    (a documented best score = 1 where there is one) or "best-setting" (the PPO
    paper's normalization everywhere, and its Table 1 beside ours:
    ``ppo_jax.report.paper_table1``). ``min_seeds``: the fewest seeds per cell
    given a bootstrap CI (``intervals.NO_CI_RULE``). Everything is checked
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
    references = load_reference_scores(reference_scores)
    runs = load_sources([Path(p) for p in paths])
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
                "bootstrap": "rliable stratified percentile bootstrap",
                "min_seeds_for_ci": min_seeds,
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
                    {"env": r.env, "setting": r.setting, "seed": int(r.seed), "update": int(r.diverged_at)}
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
