"""Rollout: ``lax.scan`` over num_steps of vmapped gymnax envs, episodes tracked inside jit.

With a recurrent network (``network: gru`` or ``lstm``) the runner carries each env's recurrent state and whether its current
observation starts an episode (``RecurrentState``); the state is reset there, inside the scan, and the rollout
records the resets and V(next observation) computed with the state that saw the step (a truncated episode's
final observation is valued with the memory of its own episode)."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from flax.training.train_state import TrainState
from jax import lax

from ppo_jax import distributions
from ppo_jax.rl.adaptation import AdaptedCoefficients
from ppo_jax.rl.envs import EnvSpec
from ppo_jax.rl.normalization import RewardScaler, RunningMeanStd, normalize, scale_reward, update_stats


class EpisodeStats(NamedTuple):
    """Per-env episode bookkeeping, all ``[B]``; ``last_*`` are NaN until an episode ends."""

    running_return: jax.Array
    running_length: jax.Array
    last_return: jax.Array
    last_length: jax.Array
    completed: jax.Array  # episodes ended during the current rollout


def init_episode_stats(num_envs: int) -> EpisodeStats:
    zeros = jnp.zeros((num_envs,), jnp.float32)
    nans = jnp.full((num_envs,), jnp.nan, jnp.float32)
    return EpisodeStats(zeros, zeros, nans, nans, zeros)


class RecurrentState(NamedTuple):
    """What a recurrent policy carries between steps: ``hidden`` (``ppo_jax.rl.recurrent.Memory``) and ``reset``
    ``[B]`` (the current observation is an episode's first: the state starts from zeros before reading it)."""

    hidden: tuple
    reset: jax.Array


class RunnerState(NamedTuple):
    train_state: TrainState
    env_state: Any
    obs: jax.Array  # [B, obs_dim] raw (unnormalized) current observation
    obs_stats: RunningMeanStd
    reward_scaler: RewardScaler
    episodes: EpisodeStats
    coefs: AdaptedCoefficients  # adapted clip_eps and KL beta
    key: jax.Array
    memory: RecurrentState | None = None  # recurrent networks only


class Transition(NamedTuple):
    """One rollout, every field ``[T, B, ...]``."""

    obs: jax.Array  # observation the policy saw (normalized if normalize_obs)
    action: jax.Array  # sampled action, unclipped (a TanhGaussian's pre-squash u)
    log_prob: jax.Array  # log pi_old(a|s)
    dist: distributions.PolicyDist | distributions.TanhGaussian  # pi_old(.|s): loc [T, B, A], log_std [T, B, A] or None
    value: jax.Array  # V_old(s)
    reward: jax.Array  # reward times reward_scale (and scaled if normalize_reward)
    terminated: jax.Array  # the episode reached a terminal state: no bootstrap
    done: jax.Array  # terminated or truncated
    next_obs: jax.Array  # observation after the step (the final observation where done), as the critic sees it
    reset: jax.Array | None = None  # recurrent: obs starts an episode (the state was zeroed before it)
    next_value: jax.Array | None = None  # recurrent: V(next_obs) with the state after this step


def first_step(dist):
    """A distribution over ``[1, B, ...]`` (a recurrent network's one-step output) as one over ``[B, ...]``."""
    per_step_std = dist.log_std is not None and dist.log_std.ndim == dist.loc.ndim
    return dist._replace(loc=dist.loc[0], log_std=dist.log_std[0] if per_step_std else dist.log_std)


def observe(cfg, stats: RunningMeanStd, obs: jax.Array) -> jax.Array:
    return normalize(stats, obs, cfg.obs_clip) if cfg.normalize_obs else obs


def flatten_obs(obs: jax.Array, num_envs: int) -> jax.Array:
    return obs.reshape(num_envs, -1).astype(jnp.float32)


def rollout(runner: RunnerState, cfg, spec: EnvSpec) -> tuple[RunnerState, Transition]:
    """Collect ``cfg.num_steps`` steps from ``cfg.num_envs`` envs; returns the new runner and ``Transition[T, B]``."""
    step_envs = jax.vmap(spec.env.step, in_axes=(0, 0, 0, None))
    apply_fn = runner.train_state.apply_fn
    params = runner.train_state.params

    recurrent = runner.memory is not None

    def env_step(runner: RunnerState, _):
        key, act_key, env_key = jax.random.split(runner.key, 3)
        obs_in = observe(cfg, runner.obs_stats, runner.obs)
        if recurrent:
            hidden, (dist, value) = apply_fn(params, runner.memory.hidden, obs_in[None], runner.memory.reset[None])
            dist, value = first_step(dist), value[0]
        else:
            dist, value = apply_fn(params, obs_in)
        action = distributions.sample(act_key, dist)
        log_prob = distributions.log_prob(dist, action)
        env_action = distributions.env_action(dist, action, spec.action_low, spec.action_high)
        next_obs, env_state, reward, terminated, truncated, info = step_envs(
            jax.random.split(env_key, cfg.num_envs), runner.env_state, env_action, spec.params
        )
        next_obs = flatten_obs(next_obs, cfg.num_envs)
        final_obs = flatten_obs(info["final_observation"], cfg.num_envs)
        reward = reward.astype(jnp.float32)
        done = jnp.logical_or(terminated, truncated)

        obs_stats = update_stats(runner.obs_stats, next_obs) if cfg.normalize_obs else runner.obs_stats
        critic_next_obs = observe(cfg, obs_stats, jnp.where(done[:, None], final_obs, next_obs))
        reward_scaler, train_reward = runner.reward_scaler, reward * cfg.reward_scale
        if cfg.normalize_reward:
            reward_scaler, train_reward = scale_reward(
                runner.reward_scaler, train_reward, done, gamma=cfg.gamma, clip=cfg.reward_clip
            )

        ep = runner.episodes
        ep_return = ep.running_return + reward
        ep_length = ep.running_length + 1.0
        episodes = EpisodeStats(
            running_return=jnp.where(done, 0.0, ep_return),
            running_length=jnp.where(done, 0.0, ep_length),
            last_return=jnp.where(done, ep_return, ep.last_return),
            last_length=jnp.where(done, ep_length, ep.last_length),
            completed=ep.completed + done,
        )
        transition = Transition(
            obs=obs_in,
            action=action,
            log_prob=log_prob,
            dist=dist
            if dist.log_std is None
            else dist._replace(log_std=jnp.broadcast_to(dist.log_std, dist.loc.shape)),
            value=value,
            reward=train_reward,
            terminated=terminated,
            done=done,
            next_obs=critic_next_obs,
        )
        memory = runner.memory
        if recurrent:  # V(next obs) reads it with the state that saw this step: no reset, even where done
            _, (_, next_value) = apply_fn(params, hidden, critic_next_obs[None], jnp.zeros((1, cfg.num_envs), bool))
            transition = transition._replace(reset=runner.memory.reset, next_value=next_value[0])
            memory = RecurrentState(hidden=hidden, reset=done)
        runner = runner._replace(
            memory=memory,
            env_state=env_state,
            obs=next_obs,
            obs_stats=obs_stats,
            reward_scaler=reward_scaler,
            episodes=episodes,
            key=key,
        )
        return runner, transition

    # The parameters are loop-invariant: close over them instead of carrying them through the scan.
    carry = runner._replace(
        train_state=None, episodes=runner.episodes._replace(completed=jnp.zeros_like(runner.episodes.completed))
    )
    carry, traj = lax.scan(env_step, carry, None, length=cfg.num_steps)
    return carry._replace(train_state=runner.train_state), traj
