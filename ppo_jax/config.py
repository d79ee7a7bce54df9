"""PPOConfig: every setting of a PPO run, as one frozen pytree.

Fields that set a shape or a Python branch are static (``pytree_node=False``):
changing them compiles a new program. Every numeric hyperparameter a sweep may
vary is a float32 leaf: ``jax.vmap(train)(stacked_cfgs, keys)`` trains many
settings in one program, and two values of a leaf share one compilation.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

import numpy as np
from flax import struct

Activation = Literal["tanh", "relu", "gelu", "silu"]
Objective = Literal["clip", "clip_no_min", "unclipped", "kl_fixed", "kl_adaptive", "dual_clip"]
Schedule = Literal["constant", "linear"]
OBJECTIVES = ("clip", "clip_no_min", "unclipped", "kl_fixed", "kl_adaptive", "dual_clip")
SCHEDULES = ("constant", "linear")

# Names of the traced float32 leaves, in declaration order.
TRACED_FIELDS = (
    "lr",
    "clip_eps",
    "vf_clip_eps",
    "ent_coef",
    "vf_coef",
    "gamma",
    "gae_lambda",
    "max_grad_norm",
    "adam_eps",
    "obs_clip",
    "reward_clip",
    "kl_beta",
    "kl_target",
    "dual_clip_c",
    "target_kl",
    "clip_kl_target",
)


def cast_leaves(cfg, names) -> None:
    """In ``__post_init__``: Python numbers in fields ``names`` become float32 leaves (weakly typed floats would retrace)."""
    for name in names:
        value = getattr(cfg, name)
        if isinstance(value, (int, float, np.floating, np.integer)) and not isinstance(value, bool):
            object.__setattr__(cfg, name, np.float32(value))


def leaf(default: float):
    return struct.field(pytree_node=True, default=default)


def static(default):
    return struct.field(pytree_node=False, default=default)


@struct.dataclass
class PPOConfig:
    """Configuration of one PPO training run (defaults: CleanRL's ppo.py / Huang et al. 2022)."""

    # ----- static: changing one compiles a new program -----
    env: str = static("CartPole-v1")
    """Environment id: a gymnax id (e.g. CartPole-v1, Pendulum-v1, Breakout-MinAtar) or a ppo_jax probe env."""
    total_timesteps: int = static(500_000)
    """Environment steps per training run (summed over the parallel envs)."""
    num_envs: int = static(4)
    """Parallel environments per training run."""
    num_steps: int = static(128)
    """Steps per environment in each rollout; one update consumes num_envs*num_steps transitions."""
    num_minibatches: int = static(4)
    """Minibatches per epoch; must divide num_envs*num_steps."""
    update_epochs: int = static(4)
    """Passes over each rollout batch."""
    hidden_sizes: tuple[int, ...] = static((64, 64))
    """Widths of the hidden layers of the actor and of the critic MLP."""
    activation: Activation = static("tanh")
    """Hidden-layer activation."""
    shared_torso: bool = static(False)
    """Actor and critic share their hidden layers (default: two separate MLPs)."""
    anneal_lr: bool = static(True)
    """Decay the learning rate linearly to 0 over the run."""
    norm_adv: bool = static(True)
    """Normalize advantages to zero mean, unit std in each minibatch."""
    clip_vloss: bool = static(True)
    """Clip the value update to vf_clip_eps around the old value (pessimistic max of the two losses)."""
    normalize_obs: bool = static(False)
    """Normalize observations by a running mean/var (one set per run), clipped to +-obs_clip."""
    normalize_reward: bool = static(False)
    """Scale rewards by the running std of the discounted return, clipped to +-reward_clip."""
    objective: Objective = static("clip")
    """Policy objective: clip (PPO), clip_no_min, unclipped (r*A), kl_fixed, kl_adaptive (PPO paper sec. 4), dual_clip."""
    clip_schedule: Schedule = static("constant")
    """Schedule of clip_eps over the run: constant, or linear decay to 0."""
    ent_schedule: Schedule = static("constant")
    """Schedule of ent_coef over the run: constant, or linear decay to 0."""
    adaptive_clip: bool = static(False)
    """Adapt clip_eps after each update to keep the KL near clip_kl_target (x/÷ 1.5, within [0.01, 0.5])."""
    early_stop_kl: bool = static(False)
    """Skip the rest of an update's minibatch steps once a minibatch's approx KL exceeds target_kl."""
    progress: bool = static(False)
    """Report progress to the host (env steps, return, steps/s) about 100 times per run."""

    # ----- traced float32 leaves: vmappable, no recompilation -----
    lr: float = leaf(2.5e-4)
    """Adam learning rate (initial value when anneal_lr)."""
    clip_eps: float = leaf(0.2)
    """Clip range epsilon of the surrogate objective: r is clipped to [1-eps, 1+eps]."""
    vf_clip_eps: float = leaf(0.2)
    """Clip range of the value update when clip_vloss."""
    ent_coef: float = leaf(0.01)
    """Entropy bonus coefficient c2."""
    vf_coef: float = leaf(0.5)
    """Value loss coefficient c1."""
    gamma: float = leaf(0.99)
    """Discount factor, in [0, 1]."""
    gae_lambda: float = leaf(0.95)
    """GAE lambda, in [0, 1]: 0 is one-step TD, 1 is Monte Carlo."""
    max_grad_norm: float = leaf(0.5)
    """Global gradient-norm clip; inf turns clipping off."""
    adam_eps: float = leaf(1e-5)
    """Adam epsilon."""
    obs_clip: float = leaf(10.0)
    """Clip of normalized observations (with normalize_obs)."""
    reward_clip: float = leaf(10.0)
    """Clip of scaled rewards (with normalize_reward)."""
    kl_beta: float = leaf(1.0)
    """KL penalty coefficient beta (kl_fixed), or its initial value (kl_adaptive)."""
    kl_target: float = leaf(0.01)
    """d_targ of kl_adaptive: beta halves when KL < d_targ/1.5 and doubles when KL > 1.5 d_targ."""
    dual_clip_c: float = leaf(3.0)
    """Lower bound c*A of the dual-clip objective for A < 0 (c > 1)."""
    target_kl: float = leaf(0.02)
    """KL threshold of early_stop_kl."""
    clip_kl_target: float = leaf(0.01)
    """KL target of adaptive_clip."""

    def __post_init__(self):
        cast_leaves(self, TRACED_FIELDS)
        if isinstance(self.hidden_sizes, list):
            object.__setattr__(self, "hidden_sizes", tuple(self.hidden_sizes))

    # ----- derived sizes -----
    @property
    def batch_size(self) -> int:
        """Transitions per update: num_envs * num_steps."""
        return self.num_envs * self.num_steps

    @property
    def minibatch_size(self) -> int:
        return self.batch_size // self.num_minibatches

    @property
    def num_updates(self) -> int:
        """Number of rollout+update iterations: total_timesteps // batch_size."""
        return self.total_timesteps // self.batch_size

    def to_dict(self) -> dict:
        """Plain-Python view (floats, lists) for JSON; stacked leaves become lists."""
        out = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name in TRACED_FIELDS:
                array = np.asarray(value)
                value = float(array) if array.ndim == 0 else array.tolist()
            elif isinstance(value, tuple):
                value = list(value)
            out[f.name] = value
        return out

    @classmethod
    def from_dict(cls, values: dict) -> "PPOConfig":
        """Inverse of ``to_dict``; unknown keys raise a ConfigError naming close matches."""
        from ppo_jax.validation import check_field_names

        check_field_names(values)
        return cls(**values)


def field_names() -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(PPOConfig))


def static_field_names() -> tuple[str, ...]:
    return tuple(f for f in field_names() if f not in TRACED_FIELDS)
