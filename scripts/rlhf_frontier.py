"""The reward vs KL-to-reference frontier of token-level PPO over beta x clip_eps (``ppo_jax.rlhf.frontier``).

    python scripts/rlhf_frontier.py experiments/rlhf_frontier_quick.yaml --out runs/rlhf_frontier_quick

Writes DIR/spec.yaml, config.json (base config, grid, seeds), metadata.json
(provenance, timings, pretraining losses), metrics.parquet (one row per setting x
seed x update), summary.csv and summary.md (one row per setting: final values, mean and 95%
bootstrap CI over seeds), frontier.png and frontier.pdf. Exit status 2 for a
spec that cannot run (message on stderr), 1 if DIR cannot be written.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("spec", type=Path, help="the spec (YAML), e.g. experiments/rlhf_frontier_quick.yaml")
    parser.add_argument("--out", type=Path, required=True, help="directory to write")
    parser.add_argument("--force", action="store_true", help="replace an existing result directory at --out")
    args = parser.parse_args(argv)

    from ppo_jax.rlhf import frontier
    from ppo_jax.rlhf.run_dir import write_atomically, write_json
    from ppo_jax.run_dir import collect_metadata, now_iso, prepare_out_dir
    from ppo_jax.validation import ConfigError

    command = ["python", "scripts/rlhf_frontier.py", *(sys.argv[1:] if argv is None else argv)]
    try:
        spec = frontier.load_spec(args.spec)
        prepare_out_dir(args.out, args.force)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    metadata = collect_metadata(command)
    table, info = frontier.run_spec(spec)
    summary = frontier.summarize(table, list(spec["grid"]))
    metadata.update(end_time=now_iso(), **info)

    def write(tmp: Path) -> None:
        shutil.copyfile(args.spec, tmp / "spec.yaml")
        write_json(tmp / "config.json", {**spec["base"].to_dict(), "grid": spec["grid"], "seeds": spec["seeds"],
                                         "pretrain_seed": spec["pretrain_seed"]})  # fmt: skip
        write_json(tmp / "metadata.json", metadata)
        table.to_parquet(tmp / "metrics.parquet", index=False)
        summary.to_csv(tmp / "summary.csv", index=False)
        (tmp / "summary.md").write_text(frontier.markdown_table(summary))
        frontier.plot(summary, tmp / "frontier", table=table, title=f"{spec['name']}: {info['num_runs']} runs, "
                      f"{spec['base'].num_updates} updates, mean and 95% CI over {len(spec['seeds'])} seeds")  # fmt: skip

    try:
        path = write_atomically(args.out, write, force=args.force)
    except OSError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    import pandas as pd

    with pd.option_context("display.width", 160, "display.max_columns", 20, "display.precision", 3):
        print(summary[list(spec["grid"]) + ["score", "true_score", "kl_ref", "response_length", "entropy"]])
    print(f"result directory: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
