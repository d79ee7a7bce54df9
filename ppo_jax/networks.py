"""Actor-critic MLP in Flax linen: one parameter tree, actor and critic evaluated together.

By default the actor and the critic are two separate MLPs ("towers"). Their
hidden layers are stored stacked, ``kernel [towers, in, out]``, so both towers
run in one batched matmul per layer instead of two (the networks stay
independent: no weight is shared and the gradients do not mix). With
``shared_torso`` there is a single tower feeding both heads.

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


def stacked_orthogonal(scale: float):
    """Initializer for ``[towers, in, out]``: an independent orthogonal matrix per tower."""
    base = nn.initializers.orthogonal(scale)

    def init(key, shape, dtype=jnp.float32):
        keys = jax.random.split(key, shape[0])
        return jnp.stack([base(keys[i], shape[1:], dtype) for i in range(shape[0])])

    return init


class ActorCritic(nn.Module):
    """obs ``[..., obs_dim]`` -> (PolicyDist with loc ``[..., A]``, value ``[...]``)."""

    action_dim: int
    discrete: bool
    hidden_sizes: Sequence[int] = (64, 64)
    activation: str = "tanh"
    shared_torso: bool = False

    @nn.compact
    def __call__(self, obs: jax.Array) -> tuple[PolicyDist, jax.Array]:
        act = ACTIVATIONS[self.activation]
        towers = 1 if self.shared_torso else 2
        batch_shape = obs.shape[:-1]
        h = obs
        for i, width in enumerate(self.hidden_sizes):
            in_dim = h.shape[-1]
            kernel = self.param(f"hidden_{i}_kernel", stacked_orthogonal(math.sqrt(2)), (towers, in_dim, width))
            bias = self.param(f"hidden_{i}_bias", nn.initializers.zeros, (towers, width))
            bias = bias.reshape((towers,) + (1,) * len(batch_shape) + (width,))
            if i == 0:
                h = jnp.einsum("...i,kij->k...j", h, kernel) + bias
            else:
                h = jnp.einsum("k...i,kij->k...j", h, kernel) + bias
            h = act(h)
        actor_h, critic_h = h[0], h[-1]
        loc = nn.Dense(self.action_dim, kernel_init=nn.initializers.orthogonal(0.01), name="policy_head")(actor_h)
        value = nn.Dense(1, kernel_init=nn.initializers.orthogonal(1.0), name="value_head")(critic_h)[..., 0]
        log_std = None if self.discrete else self.param("log_std", nn.initializers.zeros, (self.action_dim,))
        return PolicyDist(loc, log_std), value
