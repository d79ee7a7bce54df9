"""Normalized scores of the objectives sweep, beside Table 1 of the PPO paper.

Normalization as in Schulman et al. (2017), sec. 6.1: per environment, a random
policy scores 0 and the best setting scores 1; scores are then averaged over
environments. A run's score is its final return (mean episodic return over the
last 5% of updates, ``ppo_jax.final_values.final_value``), averaged over seeds. The
random policy draws actions uniformly within the action bounds (measured here,
``--random-episodes`` episodes per env).

    python scripts/objectives_table.py runs/objectives_quick [--out docs/results/objectives.md]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import jax
import numpy as np
import pandas as pd

from ppo_jax.rl.brax_envs import is_brax
from ppo_jax.rl.evaluate import random_policy_returns
from ppo_jax.final_values import bootstrap_ci, final_value
from ppo_jax.sweep.sweep_dir import TABLE_FILE, done_chunks, read_chunks
from ppo_jax.sweep.spec import load_spec

# Schulman et al. (2017), Table 1: average normalized score over 7 MuJoCo tasks, 3 seeds each, 1M steps.
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


def label(objective: str, clip_eps: float, kl_target: float, kl_beta: float) -> tuple[str, tuple]:
    """Human label and the key into PAPER_TABLE_1."""
    if objective == "unclipped":
        return "No clipping or penalty", ("unclipped", None)
    if objective == "clip":
        return f"Clipping, ε = {clip_eps:g}", ("clip", round(clip_eps, 3))
    if objective == "kl_adaptive":
        return f"Adaptive KL, d_targ = {kl_target:g}", ("kl_adaptive", round(kl_target, 4))
    if objective == "kl_fixed":
        return f"Fixed KL, β = {kl_beta:g}", ("kl_fixed", round(kl_beta, 3))
    if objective == "clip_no_min":
        return f"Clipping without min, ε = {clip_eps:g}", (objective, None)
    return f"Dual clip, ε = {clip_eps:g}, c = 3", (objective, None)


def random_policy_return(env_name: str, episodes: int, seed: int = 0, backend: str | None = None) -> float:
    """Mean return of uniformly random actions over ``episodes`` full episodes (``ppo_jax.rl.evaluate``)."""
    return float(random_policy_returns(env_name, jax.random.key(seed), episodes, backend).mean())


def brax_backends(sweep_dir: Path) -> dict[str, str]:
    """The physics pipeline each Brax task of the sweep ran on (its spec's settings)."""
    spec = load_spec(sweep_dir / "spec.yaml")
    return {s.env: s.cfg.brax_backend for s in spec.settings if is_brax(s.env)}


def read_table(sweep_dir: Path) -> pd.DataFrame:
    """The sweep's table; of an unfinished sweep, the chunks done so far (said on stderr; complete envs only)."""
    if (sweep_dir / TABLE_FILE).exists():
        return pd.read_parquet(sweep_dir / TABLE_FILE)
    done = sorted(done_chunks(sweep_dir))
    table = read_chunks(sweep_dir, done)
    spec = load_spec(sweep_dir / "spec.yaml")
    runs_per_env = len(spec.settings) // len(spec.envs) * len(spec.seeds)
    counts = table.groupby("env")[["setting_id", "seed"]].apply(lambda g: len(g.drop_duplicates()))
    complete = [env for env, n in counts.items() if n == runs_per_env]
    print(f"{sweep_dir} is unfinished ({len(done)} chunks done): the envs with every run, {', '.join(complete)}",
          file=sys.stderr)  # fmt: skip
    return table[table["env"].isin(complete)]


def scores(table: pd.DataFrame) -> pd.DataFrame:
    """Final return per env x setting x seed."""
    keys = ["env", "setting_id", "objective", "clip_eps", "kl_target", "kl_beta", "seed"]
    rows = []
    for key, runs in table.sort_values("update").groupby(keys, sort=False):
        rows.append(dict(zip(keys, key), final=float(final_value(runs["episode_return"].to_numpy(), 0.05))))
    return pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sweep_dir", type=Path)
    parser.add_argument("--out", type=Path, help="also write the Markdown table here")
    parser.add_argument("--figure", type=Path, help="also draw the normalized scores (PNG) beside the paper's")
    parser.add_argument("--random-episodes", type=int, default=100)
    args = parser.parse_args()

    table = read_table(args.sweep_dir)
    per_run = scores(table)
    envs = list(dict.fromkeys(per_run["env"]))
    backends = brax_backends(args.sweep_dir)
    random_scores = {env: random_policy_return(env, args.random_episodes, backend=backends.get(env)) for env in envs}
    per_setting = per_run.groupby(["env", "setting_id"], sort=False)["final"].mean().rename("mean").reset_index()
    best = per_setting.groupby("env")["mean"].max()
    per_run["normalized"] = [
        (r.final - random_scores[r.env]) / (best[r.env] - random_scores[r.env]) for r in per_run.itertuples()
    ]

    rows = []  # (label, mean, low, high, paper) for the figure
    lines = [
        "| objective | " + " | ".join(f"{env} final return" for env in envs) + " | normalized (mean over envs, 95% CI) | paper, Table 1 |",
        "|---|" + "---|" * len(envs) + "---|---|",
    ]
    for setting_id, runs in per_run.groupby("setting_id", sort=True):
        first = runs.iloc[0]
        name, paper_key = label(first.objective, first.clip_eps, first.kl_target, first.kl_beta)
        cells = []
        for env in envs:
            values = runs[runs.env == env]["final"].to_numpy()
            cells.append(f"{values.mean():.1f} ± {values.std(ddof=1) if len(values) > 1 else 0:.1f}")
        # Average over envs per seed index, then a bootstrap CI over seeds.
        per_seed = runs.groupby("seed")["normalized"].mean().to_numpy()
        mean, low, high = bootstrap_ci(per_seed)
        paper = PAPER_TABLE_1.get(paper_key)
        rows.append((name, mean, low, high, paper))
        lines.append(
            f"| {name} | " + " | ".join(cells) + f" | {mean:.2f} [{low:.2f}, {high:.2f}] | "
            + (f"{paper:.2f}" if paper is not None else "–") + " |"
        )
    header = [
        f"Random-policy return (uniform actions, {args.random_episodes} episodes): "
        + ", ".join(f"{env} {score:.1f}" for env, score in random_scores.items()),
        "Best setting per env (= 1): " + ", ".join(f"{env} {best[env]:.1f}" for env in envs),
        "",
    ]
    text = "\n".join(header + lines)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    if args.figure:
        draw(rows, envs, args.figure)


def draw(rows, envs, path: Path) -> None:
    """Horizontal bars: our normalized score with its 95% CI; diamonds: the paper's Table 1."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.0, 0.32 * len(rows) + 1.2))
    y = np.arange(len(rows))[::-1]
    means = np.array([r[1] for r in rows])
    err = np.array([[r[1] - r[2], r[3] - r[1]] for r in rows]).T
    ax.barh(y, means, xerr=np.nan_to_num(err), color="#0072B2", alpha=0.8, label="ppo_jax (mean over envs, 95% CI)")
    paper = [(yi, r[4]) for yi, r in zip(y, rows) if r[4] is not None]
    ax.scatter([p for _, p in paper], [yi for yi, _ in paper], marker="D", color="#D55E00", zorder=3,
               label="PPO paper, Table 1 (MuJoCo, 7 tasks)")  # fmt: skip
    ax.set_yticks(y, [r[0] for r in rows], fontsize=8)
    ax.axvline(0, color="black", lw=0.5)
    ax.set_xlabel("normalized score (random = 0, best setting = 1)")
    ax.set_title(", ".join(envs), fontsize=9)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12 - 1.0 / len(rows)), ncol=2, frameon=False)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
