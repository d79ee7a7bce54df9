"""``validate(cfg)``: everything that can be wrong with an LmConfig, as a ConfigError that says how to fix it.

Runs before anything compiles (``ppo-jax lm``, ``ppo-jax rlhf``, sweeps); traced leaves are skipped.
"""

from __future__ import annotations

import numpy as np

from ppo_jax.config_fields import check_choice, check_leaf_shapes, check_positive_ints, check_range, is_concrete
from ppo_jax.errors import ConfigError, RelationError
from ppo_jax.lm import decoder, lora, memory_switches, problems, sharding
from ppo_jax.lm.advantages import ESTIMATORS
from ppo_jax.lm.config import SWITCH_TABLES, LmConfig
from ppo_jax.lm.models import MODELS, check_sampler_dtype, is_decoder_family, make_models
from ppo_jax.lm.rollout_correction import ROLLOUT_CORRECTIONS
from ppo_jax.schedules import SCHEDULES


def validate(cfg: LmConfig) -> LmConfig:
    """Check every field; return cfg unchanged or raise ConfigError (traced leaves are skipped)."""
    check_positive_ints(
        cfg,
        (
            "digits",
            "vocab_size",
            "prompt_len",
            "max_response_len",
            "model_dim",
            "num_layers",
            "num_heads",
            "embed_dim",
            "hidden_dim",
            "num_prompts",
            "group_size",
            "num_minibatches",
            "update_epochs",
            "num_updates",
            "overlong_buffer",
            "sft_steps",
            "sft_eval_every",
            "rm_steps",
            "pretrain_batch",
            "eval_prompts",
        ),
        allow_zero=("max_response_len", "overlong_buffer", "sft_steps", "rm_steps", "eval_prompts"),
    )
    for table in SWITCH_TABLES:
        table.check(getattr(cfg, table.field))
    check_choice("lr_schedule", cfg.lr_schedule, SCHEDULES)
    problems.problem_of(cfg).check(cfg)
    memory_switches.check(cfg, decoder_family=is_decoder_family(cfg))  # dtypes first: the model is built with them
    MODELS[cfg.model].check(cfg)
    check_sampler_dtype(cfg)
    lora.check(cfg)
    needed = problems.min_response_len(cfg)
    if cfg.max_response_len and cfg.max_response_len < needed:
        raise ConfigError(
            f"max_response_len={cfg.max_response_len} cannot hold the longest intended response of "
            f"{problems.describe(cfg)} ({needed} tokens, EOS included): use at least {needed}, or 0 for the default."
        )
    if cfg.eval_samples and cfg.eval_samples < cfg.group_size:
        raise ConfigError(
            f"eval_samples={cfg.eval_samples} is below group_size={cfg.group_size}, so pass@group_size cannot be "
            f"estimated: use 0 (group_size samples) or at least {cfg.group_size}."
        )
    if cfg.eval_samples < 0:
        raise ConfigError(f"eval_samples must be >= 0 (0: group_size samples per prompt), got {cfg.eval_samples}.")
    if cfg.scratchpad_filler < 0:
        raise ConfigError(
            f"scratchpad_filler must be >= 0 (random digits opening a scratchpad), got {cfg.scratchpad_filler}."
        )
    if cfg.num_sequences % cfg.num_minibatches:
        n = cfg.num_sequences
        raise ConfigError(
            f"num_prompts x group_size = {n} sequences do not split into num_minibatches={cfg.num_minibatches} "
            f"equal minibatches; choose num_minibatches among {[d for d in range(1, n + 1) if n % d == 0]}."
        )
    if cfg.mesh:  # axes, devices, batch and parameter sizes (the scalar models differ only in their [D, 1] head)
        policy = make_models(cfg).policy
        sharding.check(cfg, decoder.param_shapes(policy) if isinstance(policy, decoder.Decoder) else None)
    if cfg.group_size < 2 and (ESTIMATORS[cfg.advantage].needs_groups or cfg.dynamic_sampling):
        what = "dynamic_sampling" if cfg.dynamic_sampling else f"advantage {cfg.advantage!r}"
        raise ConfigError(
            f"{what} compares the responses to one prompt, so it needs group_size >= 2 (got {cfg.group_size}); "
            f"set group_size (GRPO used 64, DAPO 16; 8 is a common small choice)."
        )
    if cfg.overlong_buffer and cfg.overlong_buffer >= problems.response_len(cfg):
        raise ConfigError(
            f"overlong_buffer={cfg.overlong_buffer} must be shorter than max_response_len "
            f"({problems.response_len(cfg)}): DAPO used a 4k buffer in 20k tokens."
        )
    check_range("beta", cfg.beta, low=0, hint=" beta=0 turns the KL penalty off (or kl_mode: none).")
    for name in ("lr", "adam_eps", "sft_lr", "rm_lr", "bt_temperature", "kl_target", "kl_horizon", "vf_clip_eps"):
        check_range(name, getattr(cfg, name), low=0, low_open=True)
    check_range("clip_eps_low", cfg.clip_eps_low, low=0, low_open=True, high=1)
    check_range("clip_eps_high", cfg.clip_eps_high, low=0, low_open=True)
    check_range("rollout_is_threshold", cfg.rollout_is_threshold, low=0, low_open=True, hint=" verl's default is 2.")
    check_range("rollout_is_threshold_low", cfg.rollout_is_threshold_low, low=0, low_open=True)
    check_range("dual_clip_c", cfg.dual_clip_c, low=1, low_open=True, hint=" Ye et al. (2020) use c = 3.")
    check_range(
        "max_grad_norm", cfg.max_grad_norm, low=0, low_open=True, allow_inf=True, hint=" Use inf to turn clipping off."
    )
    for name in ("ent_coef", "vf_coef", "adv_eps", "format_reward", "overlong_coef", "kl_cov_coef"):
        check_range(name, getattr(cfg, name), low=0)
    for name in ("gamma", "gae_lambda", "critic_lambda", "demo_noise", "clip_cov_fraction", "kl_cov_fraction"):
        check_range(name, getattr(cfg, name), low=0, high=1)
    check_range("sft_target_accuracy", cfg.sft_target_accuracy, low=0)
    hint = " Rollouts need a stochastic policy; evaluate greedily with eval_temperature: 0."
    check_range("temperature", cfg.temperature, low=0, low_open=True, hint=hint)
    check_range("eval_temperature", cfg.eval_temperature, low=0, hint=" 0 is greedy.")
    check_range(
        "top_entropy_quantile", cfg.top_entropy_quantile, low=0, low_open=True, high=1,
        hint=" Wang et al. (2025) train on the top 0.2; 1 trains on every token.",
    )  # fmt: skip
    for name in ("top_p", "eval_top_p"):
        check_range(name, getattr(cfg, name), low=0, low_open=True, high=1, hint=" 1 turns nucleus sampling off.")
    for name in ("top_k", "eval_top_k"):
        _check_whole(name, getattr(cfg, name))
    check_leaf_shapes(cfg)
    _check_pairs(cfg)
    return cfg


def _check_whole(name: str, value) -> None:
    """``top_k``-like leaves: a whole number >= 0 (concrete values only)."""
    if is_concrete(value):
        array = np.asarray(value)
        if np.any(array < 0) or np.any(array != np.round(array)):
            raise ConfigError(f"{name} must be a whole number >= 0 (0 turns top-k off), got {value}.")


def _check_pairs(cfg: LmConfig) -> None:
    """Relations between concrete leaves: clip_cov_low <= clip_cov_high; rollout_is_threshold_low < rollout_is_threshold
    where a correction reads both. (The clip range [1 - eps_low, 1 + eps_high]
    takes any two values: DAPO raises eps_high above eps_low, CISPO's truncation sets eps_low = 1 above it.)"""
    if is_concrete(cfg.clip_cov_low) and is_concrete(cfg.clip_cov_high):
        if np.any(np.asarray(cfg.clip_cov_high) < np.asarray(cfg.clip_cov_low)):
            raise RelationError("clip_cov_high is below clip_cov_low: the covariance window would be empty.")
    thresholds = (cfg.rollout_is_threshold, cfg.rollout_is_threshold_low)
    masks = "rollout_is_threshold_low" in ROLLOUT_CORRECTIONS[cfg.rollout_is].reads  # a lower bound is read
    if masks and all(is_concrete(x) for x in thresholds):
        if np.any(np.asarray(cfg.rollout_is_threshold_low) >= np.asarray(cfg.rollout_is_threshold)):
            raise RelationError(
                "rollout_is_threshold_low is not below rollout_is_threshold: sequence masking would drop every "
                "response (verl's lower bound is 1 / threshold)."
            )
