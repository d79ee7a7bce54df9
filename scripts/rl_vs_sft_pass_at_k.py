"""Does RL narrow the reasoning boundary? Each RL run's pass@k against its own SFT model's, for k = 1 .. 256.

Yue et al. 2025 ("Does reinforcement learning really incentivize reasoning capacity in LLMs beyond the base
model?") report RL above the base model at small k and below it at large k. This script reads a finished lm
sweep whose runs recorded the final evaluation's pass@k curve (``eval_samples``, e.g. 256), pretrains each of the
sweep's SFT models again from its pretraining seed (the same jitted ``prepare_shared`` on the same key: the
sweep's SFT model, bit for bit on the same machine) and draws its curve as a single run's ``sft_pass_at_<k>``
(``ppo_jax.lm.train.describe_shared``: the evaluation's knobs and prompt count, key 0), saved as
``sft_pass_at_k.json`` in ``--out`` (``--sft-curves`` reads it back instead of pretraining again).

For every setting and k: the mean over runs of RL pass@k minus the pass@k of the run's SFT model (paired by
pretraining seed), with a hierarchical bootstrap CI (SFT models, then RL seeds within each:
``ppo_jax.final_values.hierarchical_ci``), and the SFT curve's mean over models.

    python scripts/rl_vs_sft_pass_at_k.py runs/lm_top_entropy_chain --out docs/results/lm_top_entropy_chain

Prints the table and writes ``pass_at_k_vs_sft.csv``, ``pass_at_k_vs_sft.json`` (with provenance) and
``pass_at_k_vs_sft.png`` into ``--out``. The evaluation prompts differ between the RL runs (each run's key) and
the SFT curve (key 0): both are estimates on fresh draws of the task's prompts, and the CI counts the RL side only.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import jax
import numpy as np
import pandas as pd

from ppo_jax.final_values import hierarchical_ci
from ppo_jax.storage.provenance import collect_metadata
from ppo_jax.sweep.spec import load_spec

PASS = re.compile(r"^eval_pass_at_(\d+)$")


def sft_curves(spec, seeds: list[int]) -> dict[int, dict[int, float]]:
    """``{pretrain_seed: {k: pass@k}}`` of each SFT model, drawn as ``describe_shared`` does."""
    task, cfg = spec.task, spec.settings[0].cfg
    engine = task.engine_module()
    prepare = jax.jit(engine.prepare_shared)
    curves = {}
    for seed in seeds:
        shared = jax.device_get(prepare(cfg, jax.random.key(seed)))
        described = engine.describe_shared(cfg, shared)
        curves[seed] = {
            int(name.removeprefix("sft_pass_at_")): value
            for name, value in described.items()
            if name.removeprefix("sft_pass_at_").isdigit()
        }
        print(f"SFT model {seed}: " + ", ".join(f"pass@{k} {v:.3f}" for k, v in sorted(curves[seed].items())))
    return curves


def compare(final: pd.DataFrame, curves: dict[int, dict[int, float]], ks: list[int]) -> pd.DataFrame:
    """One row per setting x k: SFT mean, RL mean, the paired difference and its hierarchical CI."""
    rows = []
    for setting, runs in final.groupby("setting", sort=False):
        for k in ks:
            rl = runs[f"eval_pass_at_{k}"].to_numpy(float)
            sft = np.array([curves[int(s)].get(k, np.nan) for s in runs["pretrain_seed"]])
            diff = hierarchical_ci(rl - sft, runs["pretrain_seed"].to_numpy())
            rows.append(
                {
                    "setting": setting,
                    "k": k,
                    "sft": float(np.mean([curves[s][k] for s in sorted(curves)])),
                    "rl": float(np.nanmean(rl)),
                    "rl_minus_sft": diff.mean,
                    "low": diff.low,
                    "high": diff.high,
                    "runs": diff.count,
                    "sft_models": len(curves),
                }
            )
    return pd.DataFrame(rows)


def figure(table: pd.DataFrame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.0, 3.8))
    first = table[table["setting"] == table["setting"].iloc[0]]
    models = int(first["sft_models"].iloc[0])
    ax.plot(first["k"], first["sft"], "k--", marker="o", ms=3, label=f"SFT models (mean of {models})")
    colours = plt.get_cmap("tab10")
    for i, (setting, rows) in enumerate(table.groupby("setting", sort=False)):
        ax.plot(rows["k"], rows["rl"], marker="o", ms=3, color=colours(i), label=f"RL: {setting}")
        ax.fill_between(
            rows["k"], rows["sft"] + rows["low"], rows["sft"] + rows["high"], color=colours(i), alpha=0.2, lw=0
        )
    ax.set_xscale("log", base=2)
    ax.set_xlabel("k (samples per prompt)")
    ax.set_ylabel("pass@k (final evaluation)")
    ax.set_title("RL policy vs its SFT model; bands: SFT + 95% CI of the paired difference", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sweep", type=Path, help="a finished lm sweep directory with eval_pass_at_<k> columns")
    parser.add_argument("--out", type=Path, required=True, help="directory for the CSV, JSON and figure")
    parser.add_argument(
        "--sft-curves",
        type=Path,
        help="read the SFT models' curves from this file (sft_pass_at_k.json of an earlier run on the same sweep) "
        "instead of pretraining them again",
    )
    args = parser.parse_args(argv)
    table_path = args.sweep / "metrics.parquet"
    if not table_path.exists():
        print(f"error: {table_path} does not exist: give a finished sweep directory", file=sys.stderr)
        return 2
    spec = load_spec(args.sweep / "spec.yaml")
    table = pd.read_parquet(table_path)
    ks = sorted(int(m.group(1)) for c in table.columns if (m := PASS.match(c)) and table[c].notna().any())
    if not ks:
        print(f"error: {table_path} has no eval_pass_at_<k> values: the sweep needs eval_prompts > 0", file=sys.stderr)
        return 2
    settings = {s.setting_id: ", ".join(f"{k}={v}" for k, v in s.values.items()) for s in spec.settings}
    final = table.dropna(subset=[f"eval_pass_at_{ks[0]}"]).copy()
    final["setting"] = final["setting_id"].map(settings)
    seeds = sorted(int(s) for s in final["pretrain_seed"].unique())
    args.out.mkdir(parents=True, exist_ok=True)
    if args.sft_curves:
        saved = json.loads(args.sft_curves.read_text())
        curves = {int(s): {int(k): v for k, v in c.items()} for s, c in saved["sft_curves"].items()}
        if sorted(curves) != seeds or saved.get("sweep") != str(args.sweep.resolve()):
            print(
                f"error: {args.sft_curves} holds the SFT models {sorted(curves)} of {saved.get('sweep')}, not "
                f"{seeds} of {args.sweep.resolve()}: leave out --sft-curves to pretrain them",
                file=sys.stderr,
            )
            return 2
    else:
        curves = sft_curves(spec, seeds)
        (args.out / "sft_pass_at_k.json").write_text(
            json.dumps(
                {
                    "sweep": str(args.sweep.resolve()),
                    "sft_curves": {str(s): {str(k): v for k, v in c.items()} for s, c in curves.items()},
                },
                indent=1,
            )
            + "\n"
        )
    result = compare(final, curves, ks)
    print(result.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    result.to_csv(args.out / "pass_at_k_vs_sft.csv", index=False)
    record = {
        "sft_curves": {str(s): {str(k): v for k, v in c.items()} for s, c in curves.items()},
        "table": result.to_dict(orient="records"),
        "provenance": collect_metadata(["python", "scripts/rl_vs_sft_pass_at_k.py", *(argv or sys.argv[1:])], "lm"),
    }
    (args.out / "pass_at_k_vs_sft.json").write_text(json.dumps(record, indent=1, default=float) + "\n")
    figure(result, args.out / "pass_at_k_vs_sft.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
