"""RlhfConfig: every setting of a token-level PPO run on the sequence task, as one frozen pytree.

As ``ppo_jax.config.PPOConfig``: fields that set a shape or a Python branch are
static (changing one compiles a new program); every numeric hyperparameter is a
float32 leaf, so ``jax.vmap(train)`` over stacked configs sweeps beta, clip_eps,
ent_coef, lr, ... in one program, and two values of a leaf share one compilation.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

import numpy as np
from flax import struct

from ppo_jax.config import cast_leaves, leaf, static
from ppo_jax.validation import ConfigError, check_choice, check_range, close_matches

RewardModel = Literal["programmatic", "learned"]
Advantage = Literal["gae", "broadcast"]
REWARD_MODELS = ("programmatic", "learned")
ADVANTAGES = ("gae", "broadcast")

TRACED_FIELDS = (
    "beta",
    "lr",
    "clip_eps",
    "vf_clip_eps",
    "ent_coef",
    "vf_coef",
    "gamma",
    "gae_lambda",
    "max_grad_norm",
    "adam_eps",
    "demo_noise",
    "sft_lr",
    "rm_lr",
    "bt_temperature",
)


@struct.dataclass
class RlhfConfig:
    """Configuration of one RLHF run: SFT warm start, reward model, token-level PPO with a KL reward."""

    # ----- static: changing one compiles a new program -----
    vocab_size: int = static(10)
    """Tokens: PAD, EOS and vocab_size - 2 content tokens."""
    prompt_len: int = static(4)
    """Content tokens per prompt."""
    max_response_len: int = static(6)
    """Longest response, EOS included (at least prompt_len + 1: the intended response is the prompt and EOS)."""
    embed_dim: int = static(16)
    """Token embedding width of every model."""
    hidden_dim: int = static(64)
    """GRU width of every model."""
    num_prompts: int = static(64)
    """Prompts (sequences) per PPO update."""
    num_minibatches: int = static(4)
    """Minibatches per epoch; must divide num_prompts. Sequences are kept whole."""
    update_epochs: int = static(4)
    """Passes over each batch of sequences."""
    num_updates: int = static(100)
    """PPO updates (generate, score, GAE, epochs of minibatch steps)."""
    reward_model: RewardModel = static("learned")
    """Sequence score: 'programmatic' (the task's scorer) or 'learned' (a Bradley-Terry model of preferences labelled by it)."""
    advantage: Advantage = static("gae")
    """'gae': per-token GAE over the KL rewards and the final score; 'broadcast': the sequence's return minus V(prompt), on every token."""
    norm_adv: bool = static(True)
    """Normalize advantages over the response tokens of each minibatch."""
    clip_vloss: bool = static(True)
    """Clip the value update to vf_clip_eps around the old value."""
    anneal_lr: bool = static(False)
    """Decay the PPO learning rate linearly to 0."""
    sft_steps: int = static(2000)
    """Adam steps of supervised fine-tuning on demonstrations (the warm start and the reference)."""
    rm_steps: int = static(2000)
    """Adam steps of reward-model training on preference pairs (reward_model='learned')."""
    pretrain_batch: int = static(64)
    """Demonstrations or preference pairs per SFT / reward-model step."""

    # ----- traced float32 leaves: vmappable, no recompilation -----
    beta: float = leaf(0.05)
    """KL coefficient: every response token earns -beta * (log pi - log pi_ref)."""
    lr: float = leaf(1e-3)
    """PPO Adam learning rate (actor and critic)."""
    clip_eps: float = leaf(0.2)
    """Clip range epsilon of the per-token ratio."""
    vf_clip_eps: float = leaf(0.2)
    """Clip range of the value update (with clip_vloss)."""
    ent_coef: float = leaf(0.0)
    """Entropy bonus coefficient (mean entropy per response token)."""
    vf_coef: float = leaf(0.5)
    """Value loss coefficient."""
    gamma: float = leaf(1.0)
    """Discount over response tokens (1: the usual RLHF choice)."""
    gae_lambda: float = leaf(0.95)
    """GAE lambda."""
    max_grad_norm: float = leaf(1.0)
    """Global gradient-norm clip; inf turns it off."""
    adam_eps: float = leaf(1e-5)
    """Adam epsilon of the PPO optimizer."""
    demo_noise: float = leaf(0.3)
    """Probability that the demonstrator replaces a token of the intended response (SFT data)."""
    sft_lr: float = leaf(3e-3)
    """Adam learning rate of SFT."""
    rm_lr: float = leaf(3e-3)
    """Adam learning rate of the reward model."""
    bt_temperature: float = leaf(0.1)
    """Label noise of the synthetic preferences: P(a preferred to b) = sigmoid((score_a - score_b) / temperature)."""

    def __post_init__(self):
        cast_leaves(self, TRACED_FIELDS)

    @property
    def minibatch_size(self) -> int:
        return self.num_prompts // self.num_minibatches

    def to_dict(self) -> dict:
        """Plain-Python view for JSON (floats rounded to their float32 value); stacked leaves become lists."""
        out = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name in TRACED_FIELDS:
                array = np.asarray(value, np.float32)
                value = float(str(array)) if array.ndim == 0 else [float(str(v)) for v in array]
            out[f.name] = value
        return out

    @classmethod
    def from_dict(cls, values: dict) -> "RlhfConfig":
        """Inverse of ``to_dict``; unknown keys raise a ConfigError naming close matches."""
        known = [f.name for f in dataclasses.fields(cls)]
        for name in values:
            if name not in known:
                raise ConfigError(f"unknown rlhf config field {name!r}.{close_matches(name, known)}")
        return cls(**values)


def validate(cfg: RlhfConfig) -> RlhfConfig:
    """Check every field; return cfg unchanged or raise ConfigError (traced leaves are skipped)."""
    for name in (
        "vocab_size", "prompt_len", "max_response_len", "embed_dim", "hidden_dim", "num_prompts",
        "num_minibatches", "update_epochs", "num_updates", "pretrain_batch", "sft_steps", "rm_steps",
    ):  # fmt: skip
        value, minimum = getattr(cfg, name), 0 if name in ("sft_steps", "rm_steps") else 1
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < minimum:
            kind = "a non-negative" if minimum == 0 else "a positive"
            raise ConfigError(f"{name} must be {kind} integer, got {value!r}.")
    if cfg.vocab_size < 3:
        raise ConfigError(f"vocab_size must be at least 3 (PAD, EOS and one content token), got {cfg.vocab_size}.")
    if cfg.max_response_len < cfg.prompt_len + 1:
        raise ConfigError(
            f"max_response_len={cfg.max_response_len} cannot hold the intended response (the prompt and EOS): "
            f"use at least prompt_len + 1 = {cfg.prompt_len + 1}."
        )
    if cfg.num_prompts % cfg.num_minibatches:
        divisors = [d for d in range(1, cfg.num_prompts + 1) if cfg.num_prompts % d == 0]
        raise ConfigError(
            f"num_prompts={cfg.num_prompts} does not split into num_minibatches={cfg.num_minibatches} equal "
            f"minibatches; choose num_minibatches among {divisors}."
        )
    check_choice("reward_model", cfg.reward_model, REWARD_MODELS)
    check_choice("advantage", cfg.advantage, ADVANTAGES)
    check_range("beta", cfg.beta, low=0, hint=" beta=0 turns the KL penalty off.")
    for name in ("lr", "clip_eps", "vf_clip_eps", "adam_eps", "sft_lr", "rm_lr", "bt_temperature"):
        check_range(name, getattr(cfg, name), low=0, low_open=True)
    check_range("max_grad_norm", cfg.max_grad_norm, low=0, low_open=True, allow_inf=True, hint=" Use inf to turn clipping off.")
    for name in ("ent_coef", "vf_coef"):
        check_range(name, getattr(cfg, name), low=0)
    for name in ("gamma", "gae_lambda", "demo_noise"):
        check_range(name, getattr(cfg, name), low=0, high=1)
    shapes = {name: np.shape(getattr(cfg, name)) for name in TRACED_FIELDS}
    if {len(s) for s in shapes.values()} - {0, 1} or len({s[0] for s in shapes.values() if s}) > 1:
        raise ConfigError(f"config leaves must be scalars or 1-D stacks of one length, got shapes {shapes}.")
    return cfg
