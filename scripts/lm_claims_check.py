"""Recompute, from the committed LM reports, what a careful reader checks before citing docs/results/lm.md.

For each committed report directory (docs/results/lm_*/, its ``curves.csv``: at most 150 logged points per run):

* **still rising**: per run, the OLS slope of sampled pass@1 over the last 20% of its logged points and the 95%
  CI of that slope (t interval): how many runs have a positive slope, and in how many the interval lies above 0.
* **at matched accuracy**: per setting, the mean over seeds of the entropy of the sampling policy where each run's
  pass@1, smoothed as ``ppo_jax.report.matched_accuracy`` does (trailing mean of 5 logged points), first reaches
  ``--threshold`` (0.80): comparing a state at the same accuracy instead of at the last update.
* **area under the curve**: per run, the mean sampled pass@1 over its logged points; per setting the mean, the
  lowest and the highest over seeds (a whole-curve ranking beside the final values).
* **wrong minus right length**: per run, the mean over its last 10% of logged points of the length of its wrong
  responses minus that of its right ones (Dr. GRPO's claim); per setting the mean, lowest and highest over runs.
* **length over time**: the mean response length over every run at updates 0, 50, 100 and the last logged one,
  and the largest per-update mean of any run (is there room to grow?).
* **law vs line**: per setting, the median R^2 of Cui et al.'s R = -a exp(H) + b and of a straight line
  R = c + d H, both least squares over each run's logged points.

    python scripts/lm_claims_check.py --out docs/results/lm_claims_check.json

Prints one table per report and writes every number as JSON (the values docs/results/lm.md cites).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from ppo_jax.report.matched_accuracy import smoothed, still_rising

REPORTS = (
    "lm_clip_higher",
    "lm_length_bias",
    "lm_algorithms",
    "lm_kl_placement",
    "lm_eps_entropy",
    "lm_length_bias_chain",
)
SCORE, ENTROPY = "accuracy", "sample_entropy"


def r2(x: np.ndarray, y: np.ndarray) -> float:
    """R^2 of the least-squares line y = c + d x."""
    ok = np.isfinite(x) & np.isfinite(y)
    return float(stats.linregress(x[ok], y[ok]).rvalue ** 2)


def check(curves: pd.DataFrame, threshold: float) -> pd.DataFrame:
    rows = []
    keys = ["setting", "pretrain_seed", "seed"] if "pretrain_seed" in curves else ["setting", "seed"]
    for key, run in curves.groupby(keys, sort=False):
        setting, seed = key[0], key[-1]
        run = run.sort_values("update")
        tail = run.iloc[-max(1, len(run) // 10) :]  # the last 10% of logged points
        score, entropy = run[SCORE].to_numpy(float), run[ENTROPY].to_numpy(float)
        slope, low = still_rising(score)
        hit = np.flatnonzero(smoothed(score) >= threshold)
        rows.append(
            {
                "setting": setting,
                "seed": int(seed),
                "final_slope": slope,
                "auc": float(np.nanmean(score)),
                "positive": bool(slope > 0),
                "rising": bool(low > 0),
                "entropy_at": float(smoothed(entropy)[hit[0]]) if hit.size else np.nan,
                "wrong_minus_right_length": float(np.nanmean(tail["length_incorrect"] - tail["length_correct"])),
                "r2_law": r2(np.exp(entropy), score),
                "r2_line": r2(entropy, score),
            }
        )
    return pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=Path("docs/results"))
    parser.add_argument("--threshold", type=float, default=0.80)
    parser.add_argument("--out", type=Path, default=None, help="write the numbers as JSON here")
    args = parser.parse_args()
    record = {"threshold": args.threshold, "reports": {}}
    for name in REPORTS:
        curves = pd.read_csv(args.results / name / "curves.csv")
        runs = check(curves, args.threshold)
        per_setting = runs.groupby("setting", sort=False).agg(
            runs=("seed", "size"),
            positive_slope=("positive", "sum"),
            rising=("rising", "sum"),
            reached=("entropy_at", lambda v: int(np.isfinite(v).sum())),
            entropy_at=("entropy_at", "mean"),
            auc_mean=("auc", "mean"),
            auc_min=("auc", "min"),
            auc_max=("auc", "max"),
            wrong_minus_right=("wrong_minus_right_length", "mean"),
            wrong_minus_right_min=("wrong_minus_right_length", "min"),
            wrong_minus_right_max=("wrong_minus_right_length", "max"),
            median_r2_law=("r2_law", "median"),
            median_r2_line=("r2_line", "median"),
        )
        print(f"\n{name} (threshold {args.threshold}; slope of the last 20%: positive, and its CI above 0)")
        print(per_setting.to_string(float_format=lambda v: f"{v:.3f}"))
        mean_length = curves.groupby("update")["response_length"].mean()
        last = len(mean_length) - 1
        at = {str(u): float(mean_length.iloc[min(np.searchsorted(mean_length.index, u), last)]) for u in (0, 50, 100)}
        length = {**at, "last": float(mean_length.iloc[-1]), "largest_run": float(curves["response_length"].max())}
        print("mean response length at updates 0, 50, 100, last; largest of any run:", length)
        record["reports"][name] = {"settings": per_setting.reset_index().to_dict("records"), "length": length}
    if args.out:
        args.out.write_text(json.dumps(record, indent=1) + "\n")
        print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
