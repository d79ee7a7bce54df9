"""Partially observed control: gymnax envs with their velocities hidden from the observation.

The "no velocity" benchmarks of recurrent policies (SB3-contrib's RecurrentPPO: CartPoleNoVel,
PendulumNoVel; Morad et al. 2023, POPGym's "stateless" variants): the policy sees positions only and must
infer velocities from the history. ``VELOCITY_FREE[env]`` lists the observation entries kept.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from gymnax.environments import spaces

VELOCITY_FREE = {
    "CartPole-v1": (0, 2),  # x, theta (drops x_dot, theta_dot)
    "Pendulum-v1": (0, 1),  # cos theta, sin theta (drops theta_dot)
    "Acrobot-v1": (0, 1, 2, 3),  # cos/sin of both joints (drops both angular velocities)
    "MountainCar-v0": (0,),  # position (drops velocity)
    "MountainCarContinuous-v0": (0,),
}


class VelocityMasked:
    """A gymnax env whose observations (and ``info["final_observation"]``) keep only ``VELOCITY_FREE[name]``;
    everything else (dynamics, rewards, time limit, action space) is the wrapped env's."""

    def __init__(self, env, name: str):
        self._env = env
        self._keep = np.asarray(VELOCITY_FREE[name])

    def __getattr__(self, name):
        return getattr(self._env, name)

    def _mask(self, obs):
        return jnp.take(obs, self._keep, axis=-1)

    def reset(self, key, params=None):
        obs, state = self._env.reset(key, params)
        return self._mask(obs), state

    def step(self, key, state, action, params=None):
        obs, state, reward, terminated, truncated, info = self._env.step(key, state, action, params)
        if "final_observation" in info:
            info = {**info, "final_observation": self._mask(info["final_observation"])}
        return self._mask(obs), state, reward, terminated, truncated, info

    def observation_space(self, params):
        space = self._env.observation_space(params)
        low = np.broadcast_to(np.asarray(space.low, np.float32), space.shape)[self._keep]
        high = np.broadcast_to(np.asarray(space.high, np.float32), space.shape)[self._keep]
        return spaces.Box(low, high, (len(self._keep),), jnp.float32)
