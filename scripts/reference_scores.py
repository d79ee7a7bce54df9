"""Measure the random-policy reference score of each environment the report normalizes by.

    python scripts/reference_scores.py [--episodes 1000] [--json reference_scores.json]
    python scripts/reference_scores.py --envs brax/hopper brax/halfcheetah   # Brax tasks (the [brax] extra; spring pipeline)

A uniform random policy (categorical over the actions; uniform in the action
box) plays ``--episodes`` episodes of each environment, inside jit, with a
fixed key (``ppo_jax.rl.evaluate.random_policy_returns``: the same episode player as evaluation). Prints a table of mean return with its standard error, and writes
JSON. The numbers in ``ppo_jax/report/scores.py`` (REFERENCE_SCORES) come from
this script with its defaults, and the Brax tasks' from ``--envs
brax/inverted_pendulum brax/inverted_double_pendulum brax/hopper brax/walker2d
brax/halfcheetah`` (spring pipeline).
"""

from __future__ import annotations

import argparse
import json
import zlib

import jax
import numpy as np

from ppo_jax.rl.evaluate import random_policy_returns

ENVS = (
    "CartPole-v1",
    "Acrobot-v1",
    "Pendulum-v1",
    "MountainCarContinuous-v0",
    "Breakout-MinAtar",
    "SpaceInvaders-MinAtar",
)


def random_returns(name: str, episodes: int, key: jax.Array) -> np.ndarray:
    """Undiscounted returns of ``episodes`` episodes of a uniform random policy: ``float[episodes]``."""
    return random_policy_returns(name, key, episodes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default="reference_scores.json")
    parser.add_argument(
        "--envs", nargs="+", default=list(ENVS), help="environment ids (default: the gymnax ones above)"
    )
    args = parser.parse_args()
    out = {}
    print(f"{'env':<28}{'mean return':>14}{'s.e.':>10}")
    for name in args.envs:
        i = ENVS.index(name) if name in ENVS else zlib.crc32(name.encode())  # a key per env, whatever else runs
        returns = random_returns(name, args.episodes, jax.random.fold_in(jax.random.key(args.seed), i))
        mean, se = returns.mean(), returns.std(ddof=1) / np.sqrt(len(returns))
        out[name] = {"random_mean": float(mean), "standard_error": float(se), "episodes": args.episodes}
        print(f"{name:<28}{mean:>14.2f}{se:>10.2f}")
    with open(args.json, "w") as f:
        json.dump(out, f, indent=2)
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
