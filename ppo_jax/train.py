"""``train(cfg, key)``: a whole PPO run as one pure, jittable, vmappable function.

    jax.jit(train)(cfg, key)                              # one run
    jax.vmap(train, in_axes=(None, 0))(cfg, keys)         # many seeds, one program
    jax.vmap(train)(stacked_cfgs, keys)                   # many settings, one program
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from flax.training.train_state import TrainState
from jax import lax

from ppo_jax import progress
from ppo_jax.adaptation import adapt, init_coefficients, scheduled
from ppo_jax.config import PPOConfig
from ppo_jax.envs import make_env
from ppo_jax.gae import compute_gae
from ppo_jax.losses import LossCoefficients, Minibatch
from ppo_jax.networks import ActorCritic
from ppo_jax.normalization import RunningMeanStd, init_reward_scaler, init_stats, update_stats
from ppo_jax.rollout import RunnerState, flatten_obs, init_episode_stats, rollout
from ppo_jax.update import make_optimizer, set_hyperparams, update
from ppo_jax.validation import validate

METRIC_NAMES = (
    "episode_return",
    "episode_length",
    "episodes",
    "policy_loss",
    "value_loss",
    "entropy",
    "approx_kl",
    "clip_fraction",
    "explained_variance",
    "grad_norm",
    "loss",
    "kl",
    "update_fraction",
    "learning_rate",
    "clip_eps",
    "ent_coef",
    "kl_beta",
)


class TrainOutput(NamedTuple):
    """What a run returns. ``metrics[name]`` is ``[num_updates]`` (with leading vmap axes, if any).

    ``episode_return`` / ``episode_length`` at update u: mean over envs of each env's
    most recently completed episode (NaN until one has ended); ``episodes``: number
    of episodes that ended during update u's rollout.
    """

    train_state: TrainState
    obs_stats: RunningMeanStd
    metrics: dict[str, jax.Array]


def make_network(cfg: PPOConfig) -> ActorCritic:
    spec = make_env(cfg.env)
    return ActorCritic(
        action_dim=spec.action_dim,
        discrete=spec.discrete,
        hidden_sizes=tuple(cfg.hidden_sizes),
        activation=cfg.activation,
        shared_torso=cfg.shared_torso,
    )


def init_runner(cfg: PPOConfig, key: jax.Array) -> RunnerState:
    """Parameters, optimizer, envs and statistics at the start of a run."""
    spec = make_env(cfg.env)
    network = make_network(cfg)
    init_key, reset_key, run_key = jax.random.split(key, 3)
    params = network.init(init_key, jnp.zeros((spec.obs_dim,), jnp.float32))
    train_state = TrainState.create(apply_fn=network.apply, params=params, tx=make_optimizer())
    train_state = set_hyperparams(train_state, learning_rate=cfg.lr, max_grad_norm=cfg.max_grad_norm, eps=cfg.adam_eps)
    obs, env_state = jax.vmap(spec.env.reset, in_axes=(0, None))(
        jax.random.split(reset_key, cfg.num_envs), spec.params
    )
    obs = flatten_obs(obs, cfg.num_envs)
    obs_stats = init_stats((spec.obs_dim,))
    if cfg.normalize_obs:
        obs_stats = update_stats(obs_stats, obs)
    return RunnerState(
        train_state=train_state,
        env_state=env_state,
        obs=obs,
        obs_stats=obs_stats,
        reward_scaler=init_reward_scaler(cfg.num_envs),
        episodes=init_episode_stats(cfg.num_envs),
        coefs=init_coefficients(cfg),
        key=run_key,
    )


def _nanmean(x: jax.Array) -> jax.Array:
    finite = jnp.isfinite(x)
    count = finite.sum()
    return jnp.where(count > 0, jnp.where(finite, x, 0.0).sum() / jnp.maximum(count, 1), jnp.nan)


def update_step(runner: RunnerState, update_idx: jax.Array, cfg: PPOConfig) -> tuple[RunnerState, dict]:
    """One iteration: rollout, GAE, epochs of minibatch updates. Returns scalar metrics."""
    spec = make_env(cfg.env)
    learning_rate = cfg.lr * (1.0 - update_idx / cfg.num_updates) if cfg.anneal_lr else cfg.lr
    runner = runner._replace(train_state=set_hyperparams(runner.train_state, learning_rate=learning_rate))
    runner, traj = rollout(runner, cfg, spec)

    train_state = runner.train_state
    _, next_values = train_state.apply_fn(train_state.params, traj.next_obs)
    advantages, targets = compute_gae(
        traj.reward, traj.value, next_values, traj.terminated, traj.done, gamma=cfg.gamma, gae_lambda=cfg.gae_lambda
    )
    batch = Minibatch(traj.obs, traj.action, traj.log_prob, traj.value, advantages, targets, traj.dist)
    batch = jax.tree.map(lambda x: x.reshape((cfg.batch_size,) + x.shape[2:]), batch)
    coefs = LossCoefficients(
        clip_eps=scheduled(cfg.clip_schedule, runner.coefs.clip_eps, update_idx, cfg.num_updates),
        ent_coef=scheduled(cfg.ent_schedule, cfg.ent_coef, update_idx, cfg.num_updates),
        kl_beta=runner.coefs.kl_beta,
    )
    update_key, key = jax.random.split(runner.key)
    train_state, loss_metrics = update(train_state, batch, cfg, coefs, update_key)

    episodes = runner.episodes
    metrics = {
        "episode_return": _nanmean(episodes.last_return),
        "episode_length": _nanmean(episodes.last_length),
        "episodes": episodes.completed.sum(),
        **loss_metrics,
        "learning_rate": jnp.asarray(learning_rate, jnp.float32),
        **{name: jnp.asarray(value, jnp.float32) for name, value in coefs._asdict().items()},
    }
    if cfg.progress:
        progress.report(
            update_idx, metrics["episode_return"], num_updates=cfg.num_updates, batch_size=cfg.batch_size
        )
    next_coefs = adapt(runner.coefs, loss_metrics["kl"], cfg)
    return runner._replace(train_state=train_state, coefs=next_coefs, key=key), metrics


def train(cfg: PPOConfig, key: jax.Array) -> TrainOutput:
    """Train PPO for ``cfg.total_timesteps`` env steps (rounded down to whole updates).

    Args:
      cfg: the configuration; its float leaves may be traced (and vmapped).
      key: a PRNG key.

    Returns:
      ``TrainOutput(train_state, obs_stats, metrics)`` with ``metrics[name]`` of
      shape ``[num_updates]``; see ``METRIC_NAMES``.
    """
    validate(cfg)
    runner = init_runner(cfg, key)
    runner, metrics = lax.scan(
        lambda r, u: update_step(r, u, cfg), runner, jnp.arange(cfg.num_updates, dtype=jnp.int32)
    )
    return TrainOutput(runner.train_state, runner.obs_stats, metrics)
