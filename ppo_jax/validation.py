"""Checks of a PPOConfig before anything compiles, with messages that say how to fix them."""

from __future__ import annotations

import difflib

import numpy as np

from ppo_jax.config import OBJECTIVES, SCHEDULES, TRACED_FIELDS, PPOConfig, field_names


class ConfigError(ValueError):
    """A configuration that cannot run; the message says what is wrong and how to fix it."""


def close_matches(name: str, choices) -> str:
    """' Did you mean: a, b?' for up to 3 close matches of ``name`` among ``choices``, else ''."""
    matches = difflib.get_close_matches(str(name), list(choices), n=3, cutoff=0.5)
    return f" Did you mean: {', '.join(matches)}?" if matches else ""


def check_field_names(values: dict) -> None:
    """Raise ConfigError for keys that are not PPOConfig fields."""
    known = field_names()
    for name in values:
        if name not in known:
            raise ConfigError(f"unknown config field {name!r}.{close_matches(name, known)}")


def _is_concrete(value) -> bool:
    import jax

    return not isinstance(value, jax.core.Tracer)


def check_range(name: str, value, *, low=None, high=None, low_open=False, allow_inf=False, hint=""):
    if not _is_concrete(value):
        return
    array = np.asarray(value, dtype=np.float64)
    if np.any(np.isnan(array)):
        raise ConfigError(f"{name} is NaN; give a number.{hint}")
    if not allow_inf and np.any(np.isinf(array)):
        raise ConfigError(f"{name} must be finite, got {array.tolist()}.{hint}")
    if low is not None:
        bad = array <= low if low_open else array < low
        if np.any(bad):
            relation = ">" if low_open else ">="
            raise ConfigError(f"{name} must be {relation} {low}, got {array.tolist()}.{hint}")
    if high is not None and np.any(array > high):
        raise ConfigError(f"{name} must be <= {high}, got {array.tolist()}.{hint}")


def validate(cfg: PPOConfig) -> PPOConfig:
    """Check every field; return cfg unchanged or raise ConfigError.

    Static fields are always checked. Traced leaves are checked where they are
    concrete (under jit they are tracers, and the caller validated them before).
    """
    from ppo_jax.envs import known_env_names

    if not isinstance(cfg.env, str) or cfg.env not in known_env_names():
        raise ConfigError(
            f"unknown environment {cfg.env!r}.{close_matches(str(cfg.env), known_env_names())} "
            "Run `ppo-jax envs` to list all environment ids."
        )
    for name in ("total_timesteps", "num_envs", "num_steps", "num_minibatches", "update_epochs"):
        value = getattr(cfg, name)
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value <= 0:
            raise ConfigError(f"{name} must be a positive integer, got {value!r}.")
    if cfg.batch_size % cfg.num_minibatches:
        divisors = [d for d in range(1, min(cfg.batch_size, 64) + 1) if cfg.batch_size % d == 0]
        raise ConfigError(
            f"the batch (num_envs*num_steps = {cfg.num_envs}*{cfg.num_steps} = {cfg.batch_size}) "
            f"does not split into num_minibatches={cfg.num_minibatches} equal minibatches. "
            f"Choose num_minibatches among {divisors} or change num_envs/num_steps."
        )
    if cfg.total_timesteps < cfg.batch_size:
        raise ConfigError(
            f"total_timesteps={cfg.total_timesteps} is smaller than one batch "
            f"(num_envs*num_steps = {cfg.batch_size}); raise total_timesteps or shrink the batch."
        )
    if not cfg.hidden_sizes or any(
        not isinstance(h, (int, np.integer)) or isinstance(h, bool) or h <= 0 for h in cfg.hidden_sizes
    ):
        raise ConfigError(f"hidden_sizes must be one or more positive integers, got {cfg.hidden_sizes!r}.")
    check_choice("activation", cfg.activation, ("tanh", "relu", "gelu", "silu"))

    check_choice("objective", cfg.objective, OBJECTIVES)
    check_choice("clip_schedule", cfg.clip_schedule, SCHEDULES)
    check_choice("ent_schedule", cfg.ent_schedule, SCHEDULES)

    check_range("lr", cfg.lr, low=0, low_open=True, hint=" A typical value is 2.5e-4.")
    check_range("clip_eps", cfg.clip_eps, low=0, low_open=True, hint=" A typical value is 0.2.")
    check_range("vf_clip_eps", cfg.vf_clip_eps, low=0, low_open=True, hint=" Use --no-clip-vloss to turn value clipping off.")
    check_range("ent_coef", cfg.ent_coef, low=0)
    check_range("vf_coef", cfg.vf_coef, low=0)
    check_range("gamma", cfg.gamma, low=0, high=1)
    check_range("gae_lambda", cfg.gae_lambda, low=0, high=1)
    check_range("max_grad_norm", cfg.max_grad_norm, low=0, low_open=True, allow_inf=True, hint=" Use inf to turn clipping off.")
    check_range("adam_eps", cfg.adam_eps, low=0, low_open=True)
    check_range("obs_clip", cfg.obs_clip, low=0, low_open=True, allow_inf=True)
    check_range("reward_clip", cfg.reward_clip, low=0, low_open=True, allow_inf=True)
    check_range("kl_beta", cfg.kl_beta, low=0)
    check_range("kl_target", cfg.kl_target, low=0, low_open=True)
    check_range("dual_clip_c", cfg.dual_clip_c, low=1, low_open=True, hint=" Dual-clip needs c > 1 (Ye et al. 2020 use 3).")
    check_range("target_kl", cfg.target_kl, low=0, low_open=True)
    check_range("clip_kl_target", cfg.clip_kl_target, low=0, low_open=True)
    _check_leaf_shapes(cfg)
    return cfg


def check_choice(name: str, value, choices) -> None:
    if value not in choices:
        raise ConfigError(f"unknown {name} {value!r}.{close_matches(str(value), choices)} Choose one of: {', '.join(choices)}.")


def _check_leaf_shapes(cfg: PPOConfig) -> None:
    """Leaves are scalars, or stacked along one leading axis of equal length for vmap."""
    shapes = {name: np.shape(getattr(cfg, name)) for name in TRACED_FIELDS}
    ranks = {len(s) for s in shapes.values()}
    if ranks - {0, 1}:
        raise ConfigError(f"config leaves must be scalars or 1-D stacks, got shapes {shapes}.")
    lengths = {s[0] for s in shapes.values() if s}
    if len(lengths) > 1:
        raise ConfigError(f"stacked config leaves have different lengths {sorted(lengths)}; stack every leaf to the same length.")

