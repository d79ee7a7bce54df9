"""RlhfConfig: every setting of a token-level PPO run on the copy task, as one frozen pytree, and its validation.

As ``ppo_jax.rl.config.PPOConfig`` (both build on ``ppo_jax.config_fields.ConfigBase``):
fields that set a shape or a Python branch are static (changing one compiles a new
program); every numeric hyperparameter is a float32 leaf, so ``jax.vmap(train)``
over stacked configs sweeps beta, clip_eps, ent_coef, lr, ... in one program.
The pretraining fields (``PRETRAIN_FIELDS``) only shape the SFT model and the
reward model, which a sweep shares between settings unless told otherwise.
"""

from __future__ import annotations

from typing import Literal

from flax import struct

from ppo_jax.config_fields import (
    ConfigBase,
    check_choice,
    check_leaf_shapes,
    check_positive_ints,
    check_range,
    leaf,
    static,
)
from ppo_jax.errors import ConfigError
from ppo_jax.schedules import SCHEDULES, Schedule

RewardModel = Literal["programmatic", "learned"]
Advantage = Literal["gae", "broadcast"]
REWARD_MODELS = ("programmatic", "learned")
ADVANTAGES = ("gae", "broadcast")
PRETRAIN_FIELDS = ("sft_steps", "rm_steps", "pretrain_batch", "demo_noise", "sft_lr", "rm_lr", "bt_temperature")
"""Fields read only by pretraining (``ppo_jax.rlhf.train.pretrain``): SFT and the reward model."""


@struct.dataclass
class RlhfConfig(ConfigBase):
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
    lr_schedule: Schedule = static("constant")
    """Schedule of the PPO learning rate: constant, or linear decay to 0."""
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

    LEGACY_FIELDS = {"anneal_lr": lambda value: {"lr_schedule": "linear" if value else "constant"}}
    LEGACY_HINTS = {
        "anneal_lr": "anneal_lr became lr_schedule: write lr_schedule: linear (anneal_lr true) or constant (false)"
    }

    @property
    def minibatch_size(self) -> int:
        return self.num_prompts // self.num_minibatches

    def inert_fields(self) -> dict[str, str]:
        """Fields whose value this config's switches ignore, with why (a sweep refuses them as axes)."""
        inert = {}
        if not self.clip_vloss:
            inert["vf_clip_eps"] = "value clipping is off (clip_vloss: false)"
        if self.reward_model == "programmatic":
            reason = "the reward model is not trained (reward_model: programmatic)"
            inert.update(rm_steps=reason, rm_lr=reason, bt_temperature=reason)
        if self.sft_steps == 0:
            inert.update(sft_lr="there is no SFT (sft_steps: 0)", demo_noise="there is no SFT (sft_steps: 0)")
        if self.sft_steps == 0 and self.reward_model == "programmatic":
            inert["pretrain_batch"] = "nothing is pretrained (sft_steps: 0, reward_model: programmatic)"
        return inert


def validate(cfg: RlhfConfig) -> RlhfConfig:
    """Check every field; return cfg unchanged or raise ConfigError (traced leaves are skipped)."""
    check_positive_ints(
        cfg,
        (
            "vocab_size",
            "prompt_len",
            "max_response_len",
            "embed_dim",
            "hidden_dim",
            "num_prompts",
            "num_minibatches",
            "update_epochs",
            "num_updates",
            "pretrain_batch",
            "sft_steps",
            "rm_steps",
        ),
        allow_zero=("sft_steps", "rm_steps"),
    )
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
    check_choice("lr_schedule", cfg.lr_schedule, SCHEDULES)
    check_range("beta", cfg.beta, low=0, hint=" beta=0 turns the KL penalty off.")
    for name in ("lr", "clip_eps", "vf_clip_eps", "adam_eps", "sft_lr", "rm_lr", "bt_temperature"):
        check_range(name, getattr(cfg, name), low=0, low_open=True)
    check_range(
        "max_grad_norm", cfg.max_grad_norm, low=0, low_open=True, allow_inf=True, hint=" Use inf to turn clipping off."
    )
    for name in ("ent_coef", "vf_coef"):
        check_range(name, getattr(cfg, name), low=0)
    for name in ("gamma", "gae_lambda", "demo_noise"):
        check_range(name, getattr(cfg, name), low=0, high=1)
    check_leaf_shapes(cfg)
    return cfg
