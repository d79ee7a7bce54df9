"""``validate(cfg)``: everything that can be wrong with an LmConfig, as a ConfigError that says how to fix it.

Runs before anything compiles (``ppo-jax lm``, ``ppo-jax rlhf``, sweeps); traced leaves are skipped.
"""

from __future__ import annotations

import numpy as np

from ppo_jax.config_fields import check_choice, check_leaf_shapes, check_positive_ints, check_range, is_concrete
from ppo_jax.errors import ConfigError, RelationError
from ppo_jax.lm import problems
from ppo_jax.lm.config import (
    ADVANTAGES,
    COV_REGS,
    GROUP_ADVANTAGES,
    KL_ESTIMATORS,
    KL_MODES,
    LOSS_AGGS,
    MODELS,
    POLICY_LOSSES,
    PROBLEMS,
    RATIOS,
    REWARD_MODELS,
    LmConfig,
)
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
    for name, choices in (
        ("problem", PROBLEMS),
        ("model", MODELS),
        ("reward_model", REWARD_MODELS),
        ("advantage", ADVANTAGES),
        ("ratio", RATIOS),
        ("policy_loss", POLICY_LOSSES),
        ("loss_agg", LOSS_AGGS),
        ("kl_mode", KL_MODES),
        ("kl_estimator", KL_ESTIMATORS),
        ("cov_reg", COV_REGS),
        ("lr_schedule", SCHEDULES),
    ):
        check_choice(name, getattr(cfg, name), choices)
    if cfg.problem == "copy" and cfg.vocab_size < 3:
        raise ConfigError(f"vocab_size must be at least 3 (PAD, EOS and one content token), got {cfg.vocab_size}.")
    needed = problems.min_response_len(cfg)
    if cfg.max_response_len and cfg.max_response_len < needed:
        raise ConfigError(
            f"max_response_len={cfg.max_response_len} cannot hold the longest intended response of "
            f"{problems.describe(cfg)} ({needed} tokens, EOS included): use at least {needed}, or 0 for the default."
        )
    if cfg.scratchpad_filler < 0:
        raise ConfigError(
            f"scratchpad_filler must be >= 0 (random digits opening a scratchpad), got {cfg.scratchpad_filler}."
        )
    if cfg.problem == "sort" and cfg.scratchpad and cfg.digits > 9:
        raise ConfigError(
            f"the sort scratchpad writes each digit's count as one digit, so it sorts at most 9 digits, got "
            f"digits={cfg.digits}: use digits <= 9 or no scratchpad."
        )
    if cfg.model == "transformer" and cfg.model_dim % cfg.num_heads:
        raise ConfigError(
            f"num_heads={cfg.num_heads} does not divide model_dim={cfg.model_dim}; "
            f"choose num_heads among {[d for d in range(1, cfg.model_dim + 1) if cfg.model_dim % d == 0]}."
        )
    if cfg.num_sequences % cfg.num_minibatches:
        n = cfg.num_sequences
        raise ConfigError(
            f"num_prompts x group_size = {n} sequences do not split into num_minibatches={cfg.num_minibatches} "
            f"equal minibatches; choose num_minibatches among {[d for d in range(1, n + 1) if n % d == 0]}."
        )
    if cfg.group_size < 2 and (cfg.advantage in GROUP_ADVANTAGES or cfg.dynamic_sampling):
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
    check_range("dual_clip_c", cfg.dual_clip_c, low=1, low_open=True, hint=" Ye et al. (2020) use c = 3.")
    check_range(
        "max_grad_norm", cfg.max_grad_norm, low=0, low_open=True, allow_inf=True, hint=" Use inf to turn clipping off."
    )
    for name in ("ent_coef", "vf_coef", "adv_eps", "format_reward", "overlong_coef", "kl_cov_coef"):
        check_range(name, getattr(cfg, name), low=0)
    for name in ("gamma", "gae_lambda", "critic_lambda", "demo_noise", "clip_cov_fraction", "kl_cov_fraction"):
        check_range(name, getattr(cfg, name), low=0, high=1)
    check_range("sft_target_accuracy", cfg.sft_target_accuracy, low=0)
    check_leaf_shapes(cfg)
    _check_pairs(cfg)
    return cfg


def _check_pairs(cfg: LmConfig) -> None:
    """Relations between concrete leaves: clip_cov_low <= clip_cov_high. (The clip range [1 - eps_low, 1 + eps_high]
    takes any two values: DAPO raises eps_high above eps_low, CISPO's truncation sets eps_low = 1 above it.)"""
    if is_concrete(cfg.clip_cov_low) and is_concrete(cfg.clip_cov_high):
        if np.any(np.asarray(cfg.clip_cov_high) < np.asarray(cfg.clip_cov_low)):
            raise RelationError("clip_cov_high is below clip_cov_low: the covariance window would be empty.")
