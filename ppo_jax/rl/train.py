"""``train(cfg, key)``: a whole PPO run as one pure, jittable, vmappable function; the engine of ``ppo_jax.rl.task.PPO``.

    jax.jit(train)(cfg, key)                              # one run
    jax.vmap(train, in_axes=(None, 0))(cfg, keys)         # many seeds, one program
    jax.vmap(train)(stacked_cfgs, keys)                   # many settings, one program
    train(cfg, key, on_update=lambda u, m: print(u, m["episode_return"]))   # host callback per update

Besides ``train`` this module is the engine of the PPO ``Task`` (``ppo_jax.task_contract``):
``check``, ``prepare_shared``, ``init``, ``step``, ``finish`` (what ``train`` is made of; a
segmented run, ``ppo_jax.segments``, calls them itself), ``checked_state``, ``evaluate`` and ``params_tree``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
from flax.training.train_state import TrainState

from ppo_jax import threefry_cpu
from ppo_jax.errors import ConfigError
from ppo_jax.optimizer import create_train_state, set_hyperparams
from ppo_jax.rl import sequences
from ppo_jax.rl.adaptation import adapt, init_coefficients
from ppo_jax.rl.advantages import ADVANTAGES
from ppo_jax.rl.build_network import make_network
from ppo_jax.rl.config import PPOConfig, validate
from ppo_jax.rl.envs import env_spec, suite_of
from ppo_jax.rl.evaluate import EVAL_EPISODES, evaluation_key
from ppo_jax.rl.evaluate import evaluate as evaluate_params
from ppo_jax.rl.metrics import EVAL_NAMES
from ppo_jax.rl.normalization import RunningMeanStd, init_reward_scaler, init_stats, update_stats
from ppo_jax.rl.ppo_loss import LossCoefficients, Minibatch
from ppo_jax.rl.ppo_update import update
from ppo_jax.rl.rollout import RecurrentState, RunnerState, flatten_obs, init_episode_stats, rollout
from ppo_jax.scan_updates import scan_updates
from ppo_jax.schedules import scheduled

threefry_cpu.install()  # the same random bits, a faster program on the CPU


class TrainOutput(NamedTuple):
    """What a run returns. ``metrics[name]`` is ``[num_updates]`` (with leading vmap axes, if any).

    ``episode_return`` / ``episode_length`` at update u: mean over envs of each env's
    most recently completed episode (NaN until one has ended); ``episodes``: number
    of episodes that ended during update u's rollout.
    """

    train_state: TrainState
    obs_stats: RunningMeanStd
    metrics: dict[str, jax.Array]


def init(cfg: PPOConfig, key: jax.Array, shared=None) -> RunnerState:
    """The whole training state before update 0: parameters, optimizer, envs, statistics (``validate(cfg)`` first)."""
    validate(cfg)
    spec = env_spec(cfg)
    network = make_network(cfg)
    init_key, reset_key, run_key = jax.random.split(key, 3)
    memory = None
    if cfg.recurrent:  # every env starts an episode: its state is reset before the first observation
        one_step = (jnp.zeros((1, 1, spec.obs_dim), jnp.float32), jnp.ones((1, 1), bool))
        params = network.init(init_key, network.initial_memory(1), *one_step)
        memory = RecurrentState(network.initial_memory(cfg.num_envs), jnp.ones((cfg.num_envs,), bool))
    else:
        params = network.init(init_key, jnp.zeros((spec.obs_dim,), jnp.float32))
    train_state = create_train_state(network.apply, params, cfg)
    obs, env_state = jax.vmap(spec.env.reset, in_axes=(0, None))(jax.random.split(reset_key, cfg.num_envs), spec.params)
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
        memory=memory,
    )


def _nanmean(x: jax.Array) -> jax.Array:
    finite = jnp.isfinite(x)
    count = finite.sum()
    return jnp.where(count > 0, jnp.where(finite, x, 0.0).sum() / jnp.maximum(count, 1), jnp.nan)


def step(cfg: PPOConfig, runner: RunnerState, update_idx: jax.Array, shared=None) -> tuple[RunnerState, dict]:
    """Update ``update_idx``: rollout, GAE, epochs of minibatch updates. Returns the new state and scalar metrics."""
    spec = env_spec(cfg)
    learning_rate = scheduled(cfg.lr_schedule, cfg.lr, update_idx, cfg.num_updates)
    runner = runner._replace(train_state=set_hyperparams(runner.train_state, learning_rate=learning_rate))
    start = runner.memory  # a recurrent policy's state at the segment's start (None: feed-forward)
    runner, traj = rollout(runner, cfg, spec)

    train_state = runner.train_state
    if start is None:
        _, next_values = train_state.apply_fn(train_state.params, traj.next_obs)
    else:
        next_values = traj.next_value
    advantages, targets = ADVANTAGES[cfg.advantage].fn(
        traj.reward, traj.value, next_values, traj.terminated, traj.done, cfg
    )
    batch = Minibatch(traj.obs, traj.action, traj.log_prob, traj.value, advantages, targets, traj.dist)
    if start is None:
        batch = jax.tree.map(lambda x: x.reshape((cfg.batch_size,) + x.shape[2:]), batch)
    else:
        batch = sequences.from_rollout(batch, start.hidden, traj.reset)
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
    next_coefs = adapt(runner.coefs, loss_metrics["kl"], cfg)
    return runner._replace(train_state=train_state, coefs=next_coefs, key=key), metrics


def train(
    cfg: PPOConfig, key: jax.Array, shared=None, *, on_update: Callable | None = None, report_every: int = 1
) -> TrainOutput:
    """Train PPO for ``cfg.total_timesteps`` env steps (rounded down to whole updates).

    Args:
      cfg: the configuration; its float leaves may be traced (and vmapped).
      key: a PRNG key.
      shared: unused (PPO runs share nothing; the ``Task`` interface passes None).
      on_update: ``on_update(update_idx, metrics)`` called on the host after every
        update of every run (``jax.debug.callback``; under ``vmap`` once per run),
        ``metrics`` a dict of numpy scalars; None puts no callback in the program.
      report_every: call ``on_update`` only after every ``report_every``-th update
        and the last (``ppo_jax.progress.report_update``; static).

    Returns:
      ``TrainOutput(train_state, obs_stats, metrics)`` with ``metrics[name]`` of
      shape ``[num_updates]``; see ``ppo_jax.rl.metrics.METRIC_NAMES``.
    """
    runner = init(cfg, key)
    runner, metrics = scan_updates(
        lambda r, u: step(cfg, r, u),
        runner,
        0,
        cfg.num_updates,
        num_updates=cfg.num_updates,
        on_update=on_update,
        report_every=report_every,
        checked=checked_state,
    )
    return finish(cfg, runner, metrics)


def checked_state(runner: RunnerState) -> RunnerState:
    """The state whose floating-point leaves must stay finite (``non_finite``): all but each env's last episode
    return and length, NaN until an episode has ended."""
    return runner._replace(episodes=runner.episodes._replace(last_return=None, last_length=None))


def finish(cfg: PPOConfig, runner: RunnerState, metrics: dict) -> TrainOutput:
    """The run's output from its final state and its metrics (``{}`` when they went to disk segment by segment)."""
    return TrainOutput(runner.train_state, runner.obs_stats, metrics)


def check(cfg: PPOConfig) -> PPOConfig:
    """``validate(cfg)``, and the environment built (an unsupported action space is a ConfigError)."""
    validate(cfg)
    try:
        spec = env_spec(cfg)
    except (NotImplementedError, ImportError) as error:  # e.g. an action space the networks do not support
        raise ConfigError(f"environment {cfg.env}: {error}") from None
    warning = suite_of(cfg.env).warning(cfg)  # e.g. Brax's mjx on the CPU
    if warning:
        warnings.warn(warning, stacklevel=2)
    if spec.discrete and cfg.action_dist != "gaussian":
        raise ConfigError(
            f"action_dist {cfg.action_dist} shapes continuous actions, and {cfg.env} has discrete ones: "
            "drop --action-dist (the policy is a categorical)."
        )
    if spec.discrete and cfg.policy_std != "parameter":
        raise ConfigError(
            f"policy_std {cfg.policy_std} sets a Gaussian's std, and {cfg.env} has discrete actions: "
            "drop --policy-std (the policy is a categorical)."
        )
    return cfg


def prepare_shared(cfg: PPOConfig, key: jax.Array) -> None:
    """PPO runs share nothing between settings."""
    return None


def evaluate(cfg: PPOConfig, output: TrainOutput, key: jax.Array, shared=None) -> dict[str, jax.Array]:
    """Mean return of the final parameters over ``EVAL_EPISODES`` fresh episodes, per policy (``EVAL_NAMES``).

    ``key`` is the run's key; the episodes use ``evaluation_key(key)``, independent of training. ``shared``: unused
    (PPO runs share nothing).
    """
    returns = evaluate_params(cfg, output.train_state.params, output.obs_stats, evaluation_key(key), EVAL_EPISODES)
    return {EVAL_NAMES[0]: returns.stochastic.mean(), EVAL_NAMES[1]: returns.deterministic.mean()}


def evaluate_episodes(cfg: PPOConfig, output: TrainOutput, key: jax.Array, num_episodes: int):
    """Every episode of the evaluation (``ppo_jax.rl.evaluate.Evaluation``), from the run's key ``key``."""
    return evaluate_params(cfg, output.train_state.params, output.obs_stats, evaluation_key(key), num_episodes)


def params_tree(output: TrainOutput, shared=None) -> dict:
    """What params.msgpack holds: network variables and observation statistics (plain nested dicts)."""
    stats = output.obs_stats
    return {
        "params": output.train_state.params,
        "obs_stats": {"mean": stats.mean, "var": stats.var, "count": stats.count},
    }
