"""Environments behind one small interface: gymnax (>= 1.0) ids, Brax tasks (``brax/<task>``) and ppo_jax probe envs."""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import gymnax
import numpy as np
from gymnax.environments import spaces

from ppo_jax.rl import brax_envs
from ppo_jax.rl.observation_masks import VelocityMasked
from ppo_jax.rl.probe_envs import PROBE_ENVS


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
    """Every id ``--env`` accepts: gymnax ids, Brax tasks (usable with the ``[brax]`` extra), probe envs."""
    return list(gymnax.registered_envs) + brax_envs.brax_env_names() + list(PROBE_ENVS)


def env_spec(cfg) -> EnvSpec:
    """The environment of a PPOConfig: ``cfg.env`` (on ``cfg.brax_backend`` for a Brax task; velocities hidden
    with ``cfg.mask_velocity``)."""
    return make_env(cfg.env, cfg.brax_backend if brax_envs.is_brax(cfg.env) else None, cfg.mask_velocity)


@functools.cache
def has_discrete_actions(name: str) -> bool:
    """Whether env ``name`` has discrete actions, read off its action space alone: unlike ``make_env`` (whose
    observation space builds JAX arrays, a compile), this runs no JAX program, so a preset can check it while
    the command line is still being validated."""
    if brax_envs.is_brax(name):
        return False
    env, params = (PROBE_ENVS[name](), None) if name in PROBE_ENVS else gymnax.make(name)
    return isinstance(env.action_space(params if params is not None else env.default_params), spaces.Discrete)


@functools.cache
def make_env(name: str, backend: str | None = None, mask_velocity: bool = False) -> EnvSpec:
    """Build environment ``name`` with its default parameters (cached: static per name, backend and mask).

    ``backend``: the physics pipeline of a Brax task (default ``brax_envs.DEFAULT_BACKEND``); None otherwise.
    ``mask_velocity``: observations without velocities (``ppo_jax.rl.observation_masks``).
    """
    if brax_envs.is_brax(name):
        env = brax_envs.make_brax_env(name, backend or brax_envs.DEFAULT_BACKEND)
        bound = np.ones((env.action_dim,), np.float32)  # Brax actions lie in [-1, 1]^A
        return EnvSpec(env, env.default_params, env.obs_dim, False, env.action_dim, -bound, bound)
    if name in PROBE_ENVS:
        env = PROBE_ENVS[name]()
        params = env.default_params
    else:
        env, params = gymnax.make(name)
    if mask_velocity:
        env = VelocityMasked(env, name)
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
