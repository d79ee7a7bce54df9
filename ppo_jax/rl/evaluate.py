"""Evaluation of trained parameters on fresh episodes, inside jit.

    returns = evaluate(cfg, output.train_state.params, output.obs_stats, key, num_episodes=16)
    returns.stochastic, returns.deterministic            # float32[num_episodes] each

Each of ``num_episodes`` fresh environments (reset with keys drawn from ``key``,
never seen in training) plays exactly one episode, to termination or to the
environment's time limit (``max_steps_in_episode``), with the policy's
observation normalization frozen at its final statistics. The *stochastic*
policy samples its actions, as during training; the *deterministic* one takes
the mode (argmax logits / Gaussian mean, clipped to the action bounds; tanh of a squashed Gaussian's mean). Both
use the same reset keys, so they start from the same initial states.
Returns are the undiscounted sums of raw environment rewards.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ppo_jax import distributions
from ppo_jax.rl.build_network import make_network
from ppo_jax.rl.config import PPOConfig
from ppo_jax.rl.envs import EnvSpec, env_spec, make_env
from ppo_jax.rl.normalization import RunningMeanStd
from ppo_jax.rl.rollout import first_step, flatten_obs, observe

EVAL_EPISODES = 16  # default number of evaluation episodes per run and policy


class Evaluation(NamedTuple):
    """Episode returns and lengths of the final policy, each ``float32[num_episodes]``."""

    stochastic: jax.Array
    deterministic: jax.Array
    stochastic_length: jax.Array
    deterministic_length: jax.Array


def max_episode_steps(spec: EnvSpec) -> int:
    """The environment's time limit; every gymnax env and probe env has one."""
    return int(spec.params.max_steps_in_episode)


def play_episodes(
    spec: EnvSpec, policy: Callable, key: jax.Array, num_episodes: int, memory=None
) -> tuple[jax.Array, jax.Array]:
    """One episode in each of ``num_episodes`` fresh envs, to termination or the time limit; jittable.

    Args:
      spec: the environment (``ppo_jax.rl.envs.make_env``).
      policy: ``policy(obs [num_episodes, obs_dim], key) -> actions`` (int32 ``[num_episodes]``, or
        float ``[num_episodes, A]``, clipped here to the action bounds); with ``memory``,
        ``policy(obs, key, memory) -> (actions, memory)``.
      key: reset keys and the policy's and the env's randomness.
      memory: a recurrent policy's initial state (a pytree), carried from step to step; None: stateless.

    Returns:
      ``(returns, lengths)``, each ``float32[num_episodes]``: undiscounted sums of raw rewards, and steps.
    """
    reset_key, run_key = jax.random.split(key)
    obs, env_state = jax.vmap(spec.env.reset, in_axes=(0, None))(jax.random.split(reset_key, num_episodes), spec.params)
    step_envs = jax.vmap(spec.env.step, in_axes=(0, 0, 0, None))
    zeros = jnp.zeros((num_episodes,), jnp.float32)
    alive = jnp.ones((num_episodes,), bool)

    def cond(carry):
        t, alive = carry[0], carry[4]
        return jnp.logical_and(t < max_episode_steps(spec), alive.any())

    def body(carry):
        t, env_state, obs, key, alive, returns, lengths, memory = carry
        key, act_key, env_key = jax.random.split(key, 3)
        if memory is None:
            action = policy(flatten_obs(obs, num_episodes), act_key)
        else:
            action, memory = policy(flatten_obs(obs, num_episodes), act_key, memory)
        if not spec.discrete:
            action = jnp.clip(action, spec.action_low, spec.action_high)
        obs, env_state, reward, terminated, truncated, _ = step_envs(
            jax.random.split(env_key, num_episodes), env_state, action, spec.params
        )
        returns = returns + jnp.where(alive, reward.astype(jnp.float32), 0.0)
        lengths = lengths + alive.astype(jnp.float32)
        alive = jnp.logical_and(alive, ~jnp.logical_or(terminated, truncated))
        return t + 1, env_state, obs, key, alive, returns, lengths, memory

    carry = (jnp.int32(0), env_state, obs, run_key, alive, zeros, zeros, memory)
    _, _, _, _, _, returns, lengths, _ = lax.while_loop(cond, body, carry)
    return returns, lengths


def random_policy(spec: EnvSpec) -> Callable:
    """Uniform random actions: categorical over the actions, or uniform in the action box."""

    def policy(obs, key):
        if spec.discrete:
            return jax.random.randint(key, (obs.shape[0],), 0, spec.action_dim)
        return jax.random.uniform(key, (obs.shape[0], spec.action_dim), minval=spec.action_low, maxval=spec.action_high)

    return policy


def trained_policy(cfg: PPOConfig, params, obs_stats: RunningMeanStd, *, deterministic: bool) -> Callable:
    """The policy of trained ``params``, observation normalization frozen at ``obs_stats``: mode or sample; a
    recurrent network's is ``policy(obs, key, memory) -> (actions, memory)`` (one episode per env: no resets)."""
    apply_fn = make_network(cfg).apply
    spec = env_spec(cfg)

    def act(dist, key):
        action = distributions.mode(dist) if deterministic else distributions.sample(key, dist)
        return distributions.env_action(dist, action, spec.action_low, spec.action_high)

    def policy(obs, key):
        dist, _ = apply_fn(params, observe(cfg, obs_stats, obs))
        return act(dist, key)

    def recurrent_policy(obs, key, memory):
        no_reset = jnp.zeros((1, obs.shape[0]), bool)
        memory, (dist, _) = apply_fn(params, memory, observe(cfg, obs_stats, obs)[None], no_reset)
        return act(first_step(dist), key), memory

    return recurrent_policy if cfg.recurrent else policy


def random_policy_returns(env: str, key: jax.Array, num_episodes: int) -> np.ndarray:
    """Returns of ``num_episodes`` episodes of ``random_policy`` on ``env`` (compiled; ``float64[num_episodes]``;
    a Brax task on its default pipeline, ``brax_envs.DEFAULT_BACKEND``)."""
    spec = make_env(env)
    returns, _ = jax.jit(lambda k: play_episodes(spec, random_policy(spec), k, num_episodes))(key)
    return np.asarray(returns, np.float64)


def evaluate(
    cfg: PPOConfig, params, obs_stats: RunningMeanStd, key: jax.Array, num_episodes: int = EVAL_EPISODES
) -> Evaluation:
    """Stochastic and deterministic returns of ``params`` on ``num_episodes`` fresh episodes each (jittable, vmappable)."""
    spec = env_spec(cfg)

    memory = make_network(cfg).initial_memory(num_episodes) if cfg.recurrent else None

    def play(deterministic: bool):
        policy = trained_policy(cfg, params, obs_stats, deterministic=deterministic)
        return play_episodes(spec, policy, key, num_episodes, memory)

    stochastic, stochastic_length = play(False)
    deterministic, deterministic_length = play(True)
    return Evaluation(stochastic, deterministic, stochastic_length, deterministic_length)


def evaluation_key(key: jax.Array) -> jax.Array:
    """The evaluation key of a run with key ``key``: independent of every key training draws."""
    return jax.random.fold_in(key, 0x65766C)  # "evl"
