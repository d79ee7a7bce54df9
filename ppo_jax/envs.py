"""Environments behind one small interface: gymnax (>= 1.0) ids and ppo_jax probe envs."""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import gymnax
import numpy as np
from gymnax.environments import spaces

from ppo_jax.probe_envs import PROBE_ENVS


class EnvSpec(NamedTuple):
    """A built environment and what the agent needs to know about it.

    ``obs_dim`` is the size of the flattened observation; ``action_dim`` is the
    number of discrete actions or the size of the continuous action vector.
    """

    env: Any
    params: Any
    obs_dim: int
    discrete: bool
    action_dim: int
    action_low: np.ndarray | None
    action_high: np.ndarray | None


def known_env_names() -> list[str]:
    return list(gymnax.registered_envs) + list(PROBE_ENVS)


@functools.cache
def make_env(name: str) -> EnvSpec:
    """Build environment ``name`` with its default parameters (cached: static per name)."""
    if name in PROBE_ENVS:
        env = PROBE_ENVS[name]()
        params = env.default_params
    else:
        env, params = gymnax.make(name)
    obs_shape = env.observation_space(params).shape
    action_space = env.action_space(params)
    if isinstance(action_space, spaces.Discrete):
        return EnvSpec(env, params, int(np.prod(obs_shape)), True, int(action_space.n), None, None)
    if isinstance(action_space, spaces.Box):
        shape = action_space.shape or (1,)
        low = np.broadcast_to(np.asarray(action_space.low, np.float32), shape).copy()
        high = np.broadcast_to(np.asarray(action_space.high, np.float32), shape).copy()
        return EnvSpec(env, params, int(np.prod(obs_shape)), False, int(np.prod(shape)), low, high)
    raise NotImplementedError(f"{name}: action space {type(action_space).__name__} is not supported")
