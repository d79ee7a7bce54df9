"""Actor-critic MLP in Flax linen: one parameter tree, actor and critic evaluated together.

By default the actor and the critic are two separate MLPs; with
``shared_torso`` one MLP feeds both heads. (Stacking both towers into one
batched matmul per layer was measured slower on CPU: the einsum's transposes
cost more than the op it saves.)

Initialization follows Huang et al. (2022), "The 37 Implementation Details of
PPO", detail 2: orthogonal weights with gain sqrt(2) on hidden layers, 0.01 on
the policy head, 1.0 on the value head; zero biases; log-std starts at 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from ppo_jax.distributions import PolicyDist

ACTIVATIONS = {"tanh": jnp.tanh, "relu": jax.nn.relu, "gelu": jax.nn.gelu, "silu": jax.nn.silu}


class MLP(nn.Module):
    """``[..., in] -> [..., hidden_sizes[-1]]``; orthogonal(sqrt 2) kernels, zero biases."""

    hidden_sizes: Sequence[int]
    activation: str

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        for width in self.hidden_sizes:
            x = ACTIVATIONS[self.activation](nn.Dense(width, kernel_init=nn.initializers.orthogonal(math.sqrt(2)))(x))
        return x


class ActorCritic(nn.Module):
    """obs ``[..., obs_dim]`` -> (PolicyDist with loc ``[..., A]``, value ``[...]``)."""

    action_dim: int
    discrete: bool
    hidden_sizes: Sequence[int] = (64, 64)
    activation: str = "tanh"
    shared_torso: bool = False

    @nn.compact
    def __call__(self, obs: jax.Array) -> tuple[PolicyDist, jax.Array]:
        if self.shared_torso:
            actor_h = critic_h = MLP(self.hidden_sizes, self.activation, name="torso")(obs)
        else:
            actor_h = MLP(self.hidden_sizes, self.activation, name="actor_torso")(obs)
            critic_h = MLP(self.hidden_sizes, self.activation, name="critic_torso")(obs)
        loc = nn.Dense(self.action_dim, kernel_init=nn.initializers.orthogonal(0.01), name="policy_head")(actor_h)
        value = nn.Dense(1, kernel_init=nn.initializers.orthogonal(1.0), name="value_head")(critic_h)[..., 0]
        log_std = None if self.discrete else self.param("log_std", nn.initializers.zeros, (self.action_dim,))
        return PolicyDist(loc, log_std), value
