"""Measure the random-policy reference score of each environment the report normalizes by.

    python scripts/reference_scores.py [--episodes 1000] [--json reference_scores.json]

A uniform random policy (categorical over the actions; uniform in the action
box) plays ``--episodes`` episodes of each environment, inside jit, with a
fixed key. Prints a table of mean return with its standard error, and writes
JSON. The numbers in ``ppo_jax/report/scores.py`` (RANDOM_SCORES) come from
this script with its defaults.
"""

from __future__ import annotations

import argparse
import json

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ppo_jax.envs import make_env

ENVS = ("CartPole-v1", "Acrobot-v1", "Pendulum-v1", "MountainCarContinuous-v0", "Breakout-MinAtar", "SpaceInvaders-MinAtar")


def random_returns(name: str, episodes: int, key: jax.Array) -> np.ndarray:
    """Undiscounted returns of ``episodes`` episodes of a uniform random policy: ``float[episodes]``."""
    spec = make_env(name)
    reset_key, run_key = jax.random.split(key)
    obs, state = jax.vmap(spec.env.reset, in_axes=(0, None))(jax.random.split(reset_key, episodes), spec.params)
    step = jax.vmap(spec.env.step, in_axes=(0, 0, 0, None))

    def act(key):
        if spec.discrete:
            return jax.random.randint(key, (episodes,), 0, spec.action_dim)
        return jax.random.uniform(key, (episodes, spec.action_dim), minval=spec.action_low, maxval=spec.action_high)

    def body(carry, _):
        state, key, alive, total = carry
        key, act_key, step_key = jax.random.split(key, 3)
        _, state, reward, terminated, truncated, _ = step(jax.random.split(step_key, episodes), state, act(act_key), spec.params)
        total = total + jnp.where(alive, reward, 0.0)
        alive = alive & ~(terminated | truncated)
        return (state, key, alive, total), None

    carry = (state, run_key, jnp.ones((episodes,), bool), jnp.zeros((episodes,)))
    (_, _, alive, total), _ = jax.jit(lambda c: lax.scan(body, c, None, length=int(spec.params.max_steps_in_episode)))(carry)
    assert not bool(alive.any()), f"{name}: an episode outlived max_steps_in_episode"
    return np.asarray(total, dtype=np.float64)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default="reference_scores.json")
    args = parser.parse_args()
    out = {}
    print(f"{'env':<28}{'mean return':>14}{'s.e.':>10}")
    for i, name in enumerate(ENVS):
        returns = random_returns(name, args.episodes, jax.random.fold_in(jax.random.key(args.seed), i))
        mean, se = returns.mean(), returns.std(ddof=1) / np.sqrt(len(returns))
        out[name] = {"random_mean": float(mean), "standard_error": float(se), "episodes": args.episodes}
        print(f"{name:<28}{mean:>14.2f}{se:>10.2f}")
    with open(args.json, "w") as f:
        json.dump(out, f, indent=2)
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
