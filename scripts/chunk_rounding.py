"""How much a sweep's (and a run's) numbers move with the chunk size: small specs at several ``--chunk-size``.

XLA:CPU appears to round some reductions differently by batch size, so the same (setting, seed) pair trained in a
chunk of 8 pairs and in a chunk of 2 can differ at float32 rounding, and the differences can grow over updates.
For three small specs of 8 pairs (50 updates each), for each chunk size, this prints per metric the largest
absolute difference from the one-chunk sweep and the share of table cells that differ at all (metrics equal
in every cell are left out), and writes every row as JSON (``--out``). Then the same for ``ppo-jax train
--seeds 16 --chunk-size 8|4|2`` of the 8-step CartPole base against all 16 seeds in one call: the final training
state, every float leaf.

    python scripts/chunk_rounding.py --out docs/results/chunk_rounding.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

BASES = {
    "cartpole_128_steps": {"env": "CartPole-v1", "num_envs": 4, "num_steps": 128, "num_minibatches": 4},
    "cartpole_8_steps": {"env": "CartPole-v1", "num_envs": 4, "num_steps": 8, "num_minibatches": 2},
    "pendulum_64_steps": {
        "env": "Pendulum-v1",
        "num_envs": 4,
        "num_steps": 64,
        "num_minibatches": 4,
        "normalize_obs": True,
        "normalize_reward": True,
    },
}
UPDATES = 50


def spec_of(case: str) -> dict:
    """2 clip ranges x 4 seeds (8 pairs) of the case, 50 updates of 4 epochs."""
    base = dict(BASES[case])
    env = base.pop("env")
    base.update(total_timesteps=UPDATES * base["num_envs"] * base["num_steps"], update_epochs=4)
    return {"name": case, "envs": [env], "seeds": 4, "base": base, "grid": {"clip_eps": [0.1, 0.2]}, "log_every": 1}


SIZES = (8, 4, 2)


def train_rows() -> list[dict]:
    """``ppo-jax train --seeds 16`` of the 8-step CartPole base: the final training state (every float leaf) at
    ``--chunk-size`` 8, 4, 2 against all 16 seeds in one call (``ppo_jax.segments.Segments.chunk_size``)."""
    import jax
    import jax.numpy as jnp

    from ppo_jax.rl.config import PPOConfig
    from ppo_jax.rl.task import PPO
    from ppo_jax.segments import compile_segments

    base = dict(BASES["cartpole_8_steps"])
    base.pop("env")
    cfg = PPOConfig(total_timesteps=UPDATES * 4 * 8, update_epochs=4, **base)
    keys = jnp.stack([jax.random.key(seed) for seed in range(16)])

    def final_state(chunk: int) -> np.ndarray:
        segments = compile_segments(PPO, cfg, keys, None, UPDATES, chunk_size=chunk)
        carry, _ = segments.advance(cfg, segments.init(cfg, keys, None), 0, None)
        leaves = [x for x in jax.tree.leaves(carry) if jnp.issubdtype(x.dtype, jnp.floating)]
        return np.concatenate([np.asarray(x, np.float64).ravel() for x in leaves])

    reference = final_state(0)
    rows = []
    for chunk in (8, 4, 2):
        state = final_state(chunk)
        differ = ~((reference == state) | (np.isnan(reference) & np.isnan(state)))
        rows.append(
            {
                "case": "train_cartpole_8_steps",
                "chunk_size": chunk,
                "metric": "final training state (float leaves) vs 16",
                "max_abs_diff": float(np.nanmax(np.abs(reference - state))) if differ.any() else 0.0,
                "cells_differing": float(differ.mean()),
            }
        )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="write the differences as JSON here")
    args = parser.parse_args()
    from ppo_jax import sweep
    from ppo_jax.storage.provenance import collect_metadata

    rows = []
    for case in BASES:
        tables = {size: sweep.run(spec_of(case), chunk_size=size, progress=False, cache_dir=None) for size in SIZES}
        reference = tables[SIZES[0]]
        metrics = [c for c in reference.columns if reference[c].dtype.kind == "f" and c != "clip_eps"]
        for size in SIZES[1:]:
            for name in metrics:
                a, b = reference[name].to_numpy(), tables[size][name].to_numpy()
                differ = ~((a == b) | (np.isnan(a) & np.isnan(b)))
                rows.append(
                    {
                        "case": case,
                        "chunk_size": size,
                        "metric": name,
                        "max_abs_diff": float(np.nanmax(np.abs(a - b))) if differ.any() else 0.0,
                        "cells_differing": float(differ.mean()),
                    }
                )
    rows += train_rows()
    print(f"{'case':<24} {'chunk size':>10} {'metric':<42} {'max |diff|':>12} {'cells differing':>16}")
    for row in rows:
        if row["cells_differing"]:
            print(
                f"{row['case']:<24} {row['chunk_size']:>10} {row['metric']:<42} {row['max_abs_diff']:>12.3g} "
                f"{row['cells_differing']:>16.1%}"
            )
    print("(metrics not listed: equal in every cell)")
    if args.out is not None:
        specs = {case: spec_of(case) for case in BASES}
        record = {"specs": specs, "reference_chunk_size": SIZES[0], "rows": rows, **collect_metadata(sys.argv, "ppo")}
        args.out.write_text(json.dumps(record, indent=1) + "\n")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
