"""The actor-critic a PPOConfig asks for: feed-forward (``networks.ActorCritic``) or recurrent
(``recurrent.RecurrentActorCritic``), sized for its env's observation and action spaces."""

from __future__ import annotations

import flax.linen as nn

from ppo_jax.rl.networks import ActorCritic
from ppo_jax.rl.recurrent import RecurrentActorCritic


def make_network(cfg) -> nn.Module:
    """The actor-critic of a PPOConfig: its env's action space, cfg's widths, activation and torso; an
    ``ActorCritic`` or, with ``network: gru|lstm``, a ``ppo_jax.rl.recurrent.RecurrentActorCritic``."""
    from ppo_jax.rl.envs import (
        env_spec,
    )  # gymnax starts a JAX backend: imported on first use (see ppo_jax.task_contract)

    spec = env_spec(cfg)
    fields = dict(
        action_dim=spec.action_dim,
        discrete=spec.discrete,
        hidden_sizes=tuple(cfg.hidden_sizes),
        activation=cfg.activation,
        shared_torso=cfg.shared_torso,
        squash=cfg.action_dist == "tanh_gaussian",
        critic_hidden_sizes=tuple(cfg.critic_hidden_sizes),
        state_dependent_std=cfg.policy_std == "state",
        kernel_init=cfg.kernel_init,
        head_hidden_sizes=tuple(cfg.head_hidden_sizes),
    )
    if cfg.recurrent:
        return RecurrentActorCritic(**fields, rnn_hidden_size=cfg.rnn_hidden_size, cell=cfg.network)
    return ActorCritic(**fields)
