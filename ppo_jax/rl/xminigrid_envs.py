"""XLand-MiniGrid's MiniGrid tasks (``xminigrid/MiniGrid-Empty-6x6``, ...) behind the gymnax interface.

Nikulin et al. 2024, "XLand-MiniGrid: Scalable Meta-Reinforcement Learning Environments in JAX" (NeurIPS
Datasets and Benchmarks; github.com/corl-team/xland-minigrid). Its envs take ``reset(params, key)`` and
``step(params, timestep, action)`` and return a dm_env-style ``TimeStep``; ``XMiniGridEnv`` turns that into
the six-value gymnax step the rollout reads:

* ``terminated``: the goal reached (the TimeStep's ``discount`` is 0); ``truncated``: the task's time limit
  (``max_steps``) reached without it, so PPO bootstraps from V(``info["final_observation"]``);
* an ended episode restarts from ``reset(key)`` with the step's fresh key (a new layout where the task draws one).

The observation is the agent's egocentric view, ``[view, view, 2]`` uint8 (tile id, colour), flattened to
float32 by the rollout. Offered: the single-task MiniGrid ports (the ``XLand-MiniGrid-R*`` meta-RL tasks need
a benchmark of rulesets, downloaded on first use: not offered). XLand-MiniGrid is an optional extra
(``pip install "ppo-jax[xminigrid]"``); this module imports it on first use.
"""

from __future__ import annotations

import functools
import importlib.util
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

PREFIX = "xminigrid/"
TASKS = (
    "MiniGrid-BlockedUnlockPickUp",
    "MiniGrid-DoorKey-5x5",
    "MiniGrid-DoorKey-6x6",
    "MiniGrid-DoorKey-8x8",
    "MiniGrid-DoorKey-16x16",
    "MiniGrid-Empty-5x5",
    "MiniGrid-Empty-6x6",
    "MiniGrid-Empty-8x8",
    "MiniGrid-Empty-16x16",
    "MiniGrid-EmptyRandom-5x5",
    "MiniGrid-EmptyRandom-6x6",
    "MiniGrid-EmptyRandom-8x8",
    "MiniGrid-EmptyRandom-16x16",
    "MiniGrid-FourRooms",
    "MiniGrid-LockedRoom",
    "MiniGrid-MemoryS8",
    "MiniGrid-MemoryS16",
    "MiniGrid-MemoryS32",
    "MiniGrid-MemoryS64",
    "MiniGrid-MemoryS128",
    "MiniGrid-Playground",
    "MiniGrid-Unlock",
    "MiniGrid-UnlockPickUp",
)
"""xminigrid 0.9.3's ``MiniGrid-*`` registry, listed here so that ids are known without the extra."""


def names() -> list[str]:
    return [PREFIX + task for task in TASKS]


def available() -> bool:
    """Whether the ``[xminigrid]`` extra is installed (found without importing it: no JAX op runs)."""
    return importlib.util.find_spec("xminigrid") is not None


@struct.dataclass
class XMiniGridParams:
    """The task's own ``EnvParams`` (static fields: grid size, view size, time limit) and its time limit."""

    env_params: Any
    max_steps_in_episode: int = struct.field(pytree_node=False)


class XMiniGridEnv:
    """An XLand-MiniGrid env as a gymnax-style env: explicit keys, six-value ``step``, truncation apart."""

    def __init__(self, env, env_params, name: str):
        self.env = env
        self.name = name
        self.default_params = XMiniGridParams(env_params, int(env_params.max_steps))

    def reset(self, key: jax.Array, params: XMiniGridParams):
        timestep = self.env.reset(params.env_params, key)
        return timestep.observation, timestep

    def step(self, key: jax.Array, state, action: jax.Array, params: XMiniGridParams):
        """One step; where the episode ended, the returned obs and state are a fresh reset from ``key``."""
        stepped = self.env.step(params.env_params, state, action)
        terminated = stepped.discount == 0.0
        truncated = jnp.logical_and(stepped.last(), ~terminated)
        done = stepped.last()
        reset_obs, reset_state = self.reset(key, params)
        next_state = jax.tree.map(lambda fresh, cont: jnp.where(done, fresh, cont), reset_state, stepped)
        obs = jnp.where(done, reset_obs, stepped.observation)
        return obs, next_state, stepped.reward, terminated, truncated, {"final_observation": stepped.observation}

    def action_space(self, params: XMiniGridParams | None = None):
        from gymnax.environments import spaces

        return spaces.Discrete(self.env.num_actions((params or self.default_params).env_params))

    def observation_space(self, params: XMiniGridParams):
        from gymnax.environments import spaces

        shape = self.env.observation_shape(params.env_params)
        return spaces.Box(0, 255, tuple(shape), jnp.uint8)


@functools.cache
def make(name: str) -> XMiniGridEnv:
    """``XMiniGridEnv`` of ``xminigrid/<task>`` with its default parameters (cached)."""
    import xminigrid

    env, env_params = xminigrid.make(name[len(PREFIX) :])
    return XMiniGridEnv(env, env_params, name)
