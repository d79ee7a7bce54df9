"""The reward-vs-KL frontier experiment: a grid of traced settings x seeds as ONE ``jit(vmap(train))`` program.

Spec (YAML)::

    name: rlhf_frontier_quick
    base: {num_updates: 100, ...}     # RlhfConfig fields; the rest are the defaults
    seeds: 3                           # seeds 0..2, or a list
    pretrain_seed: 0                   # one SFT model and one reward model, shared by every run
    grid:                              # Cartesian product of traced leaves, last axis fastest
      clip_eps: [0.1, 0.15, 0.2, 0.3]
      beta: [0.0, 0.01, 0.03, 0.1, 0.3]

Every run starts from the same SFT model and is scored by the same reward model
(as a study of PPO settings on one RLHF pipeline would), so seeds vary the PPO
run only: the critic's initialization, the prompts, sampling and shuffling.

Outputs (``run_spec``): the tidy table (one row per setting x seed x update), and
``summarize`` turns it into one row per setting: final values (mean over the last
10% of updates) with their mean and 95% bootstrap CI over seeds. ``plot`` draws
the frontier (Stiennon et al. 2020, fig. 5; Gao et al. 2022, fig. 1): x = KL to
the reference, y = score, one colour and marker per clip_eps (Okabe-Ito), points
labelled by beta; a third panel follows the programmatic score against the KL
during training, one line per beta (over-optimization shows as a rise, then a fall).
"""

from __future__ import annotations

import itertools
import time
from pathlib import Path

import numpy as np

from ppo_jax.rlhf.config import TRACED_FIELDS, RlhfConfig, validate
from ppo_jax.rlhf.run_dir import FINAL_FRACTION
from ppo_jax.stats import bootstrap_ci, final_return
from ppo_jax.sweep_yaml import SpecError, parse_yaml

SPEC_KEYS = ("name", "base", "seeds", "pretrain_seed", "grid")
SUMMARY_METRICS = ("score", "true_score", "kl_ref", "kl_ref_sample", "response_length", "entropy")
OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#D55E00", "#56B4E9", "#F0E442", "#000000")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


def load_spec(path) -> dict:
    """Read and check a spec; returns ``{"name", "base": RlhfConfig, "seeds": [int], "pretrain_seed", "grid": {field: [float]}}``."""
    path = Path(path)
    if not path.is_file():
        raise SpecError(f"spec file {path} does not exist.")
    data, _ = parse_yaml(path.read_text(), str(path))
    if not isinstance(data, dict):
        raise SpecError(f"{path}: the spec must be a mapping with keys {', '.join(SPEC_KEYS)}.")
    unknown = set(data) - set(SPEC_KEYS)
    if unknown:
        raise SpecError(f"{path}: unknown keys {sorted(unknown)}; the spec takes {', '.join(SPEC_KEYS)}.")
    base = RlhfConfig.from_dict(dict(data.get("base") or {}))
    validate(base)
    seeds = data.get("seeds", 1)
    seeds = list(range(seeds)) if isinstance(seeds, int) else list(seeds)
    if not seeds or any(not isinstance(s, int) or isinstance(s, bool) or s < 0 for s in seeds):
        raise SpecError(f"{path}: seeds must be a positive count or a list of non-negative integers, got {data.get('seeds')!r}.")
    grid = dict(data.get("grid") or {})
    for name, values in grid.items():
        if name not in TRACED_FIELDS:
            raise SpecError(
                f"{path}: grid axis {name!r} is not a traced RlhfConfig field (one program per spec); "
                f"choose among {', '.join(TRACED_FIELDS)} or set it in base."
            )
        if not isinstance(values, list) or not values:
            raise SpecError(f"{path}: grid.{name} must be a non-empty list, got {values!r}.")
        for value in values:
            validate(base.replace(**{name: np.float32(value)}))
    return {
        "name": str(data.get("name", path.stem)),
        "base": base,
        "seeds": seeds,
        "pretrain_seed": int(data.get("pretrain_seed", 0)),
        "grid": {name: [float(v) for v in values] for name, values in grid.items()},
    }


def settings(spec: dict) -> list[dict]:
    """Every grid point as ``{field: value}``, last axis fastest."""
    names = list(spec["grid"])
    return [dict(zip(names, values)) for values in itertools.product(*(spec["grid"][n] for n in names))]


def run_spec(spec: dict, say=print):
    """Pretrain once, then train every setting x seed as one program. Returns ``(table, info)``.

    ``table``: pandas DataFrame, one row per setting x seed x update, columns
    ``setting``, the grid axes, ``seed``, ``update`` and ``METRIC_NAMES``.
    ``info``: timings and the pretraining losses, for metadata.json.
    """
    import jax
    import jax.numpy as jnp
    import pandas as pd

    from ppo_jax.rlhf.train import METRIC_NAMES, compile_and_run, pretrain, train

    base, seeds, grid = spec["base"], spec["seeds"], settings(spec)
    runs = [(i, point, seed) for i, point in enumerate(grid) for seed in seeds]
    cfgs = [base.replace(**{k: np.float32(v) for k, v in point.items()}) for _, point, _ in runs]
    stacked = jax.tree.map(lambda *x: jnp.stack(x), *cfgs)
    keys = jnp.stack([jax.random.key(seed) for _, _, seed in runs])
    say(f"{spec['name']}: {len(grid)} settings x {len(seeds)} seeds = {len(runs)} runs x {base.num_updates} updates")

    start = time.perf_counter()
    pretrained = jax.block_until_ready(jax.jit(pretrain)(base, jax.random.key(spec["pretrain_seed"])))
    pretrain_seconds = time.perf_counter() - start
    say(f"pretrain (SFT {base.sft_steps} steps, reward model {base.rm_steps} steps): {pretrain_seconds:.1f} s")

    output, compile_seconds, run_seconds = compile_and_run(
        jax.vmap(train, in_axes=(0, 0, None)), stacked, keys, pretrained, say=say
    )

    num_updates = base.num_updates
    columns = {"setting": np.repeat([i for i, _, _ in runs], num_updates)}
    for name in spec["grid"]:
        columns[name] = np.repeat([point[name] for _, point, _ in runs], num_updates)
    columns["seed"] = np.repeat([seed for _, _, seed in runs], num_updates)
    columns["update"] = np.tile(np.arange(num_updates), len(runs))
    columns.update({name: np.asarray(output.metrics[name]).reshape(-1) for name in METRIC_NAMES})
    info = {
        "num_runs": len(runs),
        "pretrain_seconds": pretrain_seconds,
        "compile_seconds": compile_seconds,
        "run_seconds": run_seconds,
        "sft_final_loss": float(np.mean(pretrained.sft_loss[-50:])) if base.sft_steps else None,
        "rm_final_loss": float(np.mean(pretrained.rm_loss[-50:])) if len(pretrained.rm_loss) else None,
    }
    return pd.DataFrame(columns), info


def summarize(table, grid_axes) -> "object":
    """One row per setting: for each SUMMARY_METRICS name, the mean over seeds of its final value and a 95% CI.

    Also ``score_start`` and ``true_score_start``: the scores at the first update
    (the SFT policy, before any PPO step), mean over seeds.
    """
    import pandas as pd

    rows = []
    for keys, group in table.groupby(list(grid_axes), sort=False):
        keys = keys if isinstance(keys, tuple) else (keys,)
        row = dict(zip(grid_axes, keys))
        per_seed = group.sort_values(["seed", "update"]).groupby("seed")
        row["seeds"] = per_seed.ngroups
        for name in SUMMARY_METRICS:
            finals = [final_return(g[name].to_numpy(), FINAL_FRACTION) for _, g in per_seed]
            row[name], row[f"{name}_lo"], row[f"{name}_hi"] = bootstrap_ci(finals)
        first = group[group["update"] == group["update"].min()]
        row["score_start"], row["true_score_start"] = first["score"].mean(), first["true_score"].mean()
        rows.append(row)
    return pd.DataFrame(rows)


def markdown_table(summary) -> str:
    """The summary as a Markdown table: one row per setting, final values as mean [95% CI] over seeds."""

    def cell(row, name, digits):
        return f"{row[name]:.{digits}f} [{row[name + '_lo']:.{digits}f}, {row[name + '_hi']:.{digits}f}]"

    lines = [
        "| ε | β | RM score | programmatic score | KL to reference (nats) | response length | entropy (nats/token) |",
        "|---|---|---|---|---|---|---|",
    ]
    for _, row in summary.sort_values(["clip_eps", "beta"]).iterrows():
        lines.append(
            f"| {row['clip_eps']:g} | {row['beta']:g} | {cell(row, 'score', 2)} | {cell(row, 'true_score', 3)} | "
            f"{cell(row, 'kl_ref', 2)} | {row['response_length']:.2f} | {row['entropy']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def _trajectories(ax, table, clip_eps: float) -> None:
    """True score vs KL during training, one line per beta at ``clip_eps`` (mean over seeds, 5-update rolling mean)."""
    eps_values = np.array(sorted(table["clip_eps"].unique()))
    eps = eps_values[np.argmin(np.abs(eps_values - clip_eps))]
    runs = table[table["clip_eps"] == eps]
    curves = runs.groupby(["beta", "update"])[["kl_ref", "true_score"]].mean().reset_index()
    for i, (beta, curve) in enumerate(curves.groupby("beta", sort=True)):
        smooth = curve.sort_values("update")[["kl_ref", "true_score"]].rolling(5, min_periods=1).mean()
        ax.plot(smooth["kl_ref"], smooth["true_score"], color=OKABE_ITO[i % len(OKABE_ITO)], linewidth=1.3,
                linestyle=("-", "--", "-.", ":")[i % 4], label=f"β = {beta:g}")  # fmt: skip
    start = runs[runs["update"] == runs["update"].min()]["true_score"].mean()
    ax.plot([0.0], [start], marker="*", markersize=10, color="black", linestyle="none", label="SFT")
    ax.set_title(f"during training (ε = {eps:g})", fontsize=9)
    ax.set_xlabel("KL(π ‖ π_ref) per response (nats)")
    ax.set_ylabel("programmatic score")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)


def plot(summary, path_stem: Path, *, table=None, title: str = "", trajectory_eps: float = 0.2) -> list[Path]:
    """The frontier (PNG and PDF): final RM score vs KL and final programmatic score vs KL, one series per clip_eps;
    with ``table``, a third panel of programmatic score vs KL during training (``_trajectories``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [("score", "reward-model score (final)"), ("true_score", "programmatic score (final)")]
    ncols = 3 if table is not None else 2
    fig, axes = plt.subplots(1, ncols, figsize=(4.3 * ncols, 3.8), constrained_layout=True)
    for ax, (metric, label) in zip(axes, panels):
        for i, (eps, group) in enumerate(summary.groupby("clip_eps", sort=True)):
            group = group.sort_values("beta")
            colour, marker = OKABE_ITO[i % len(OKABE_ITO)], MARKERS[i % len(MARKERS)]
            x, y = group["kl_ref"].to_numpy(), group[metric].to_numpy()
            xerr = np.abs(np.stack([x - group["kl_ref_lo"], group["kl_ref_hi"] - x]))
            yerr = np.abs(np.stack([y - group[f"{metric}_lo"], group[f"{metric}_hi"] - y]))
            ax.errorbar(x, y, xerr=np.nan_to_num(xerr), yerr=np.nan_to_num(yerr), color=colour, marker=marker,
                        markersize=5, linewidth=1.2, capsize=2, label=f"ε = {eps:g}")  # fmt: skip
            if i == 0:
                for xi, yi, beta in zip(x, y, group["beta"]):
                    ax.annotate(f"β={beta:g}", (xi, yi), textcoords="offset points", xytext=(4, -10), fontsize=7)
        start = summary[f"{metric}_start"].mean()
        ax.text(0.02, 0.97, f"SFT start: {start:.3g} at KL 0", transform=ax.transAxes, va="top", fontsize=7)
        ax.set_xlabel("KL(π ‖ π_ref) per response (nats, final)")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8, title="clip", title_fontsize=8)
    if table is not None:
        _trajectories(axes[2], table, trajectory_eps)
    if title:
        fig.suptitle(title, fontsize=10)
    paths = []
    for suffix, kwargs in ((".png", {"dpi": 100}), (".pdf", {})):
        path = path_stem.with_suffix(suffix)
        fig.savefig(path, **kwargs)
        paths.append(path)
    plt.close(fig)
    return paths
