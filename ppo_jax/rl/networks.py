"""Actor-critic MLP in Flax linen: one parameter tree, actor and critic evaluated together.

By default the actor and the critic are two separate MLPs; with
``shared_torso`` one MLP feeds both heads.

Initialization (``kernel_init``) follows Huang et al. (2022), "The 37
Implementation Details of PPO", detail 2: orthogonal weights with gain sqrt(2)
on hidden layers, 0.01 on the policy head, 1.0 on the value head; zero biases;
log-std starts at 0. ``lecun_uniform`` is Brax's networks' init instead (every
kernel, heads included, uniform with variance 1/fan_in).

A Gaussian policy's std (``policy_std``) is a state-independent parameter
(the PPO paper, sec. 6.1) or an output of the actor, ``softplus(x) + 0.001``
(Brax PPO's ``NormalTanhDistribution``).

The orthogonal init is ``ppo_jax.initializers.orthogonal`` (QR-free).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from ppo_jax.distributions import PolicyDist, TanhGaussian
from ppo_jax.initializers import orthogonal

ACTIVATIONS = {"tanh": jnp.tanh, "relu": jax.nn.relu, "gelu": jax.nn.gelu, "silu": jax.nn.silu}
MIN_STD = 1e-3  # Brax PPO's min_std under a state-dependent std


def kernel_initializer(kind: str, orthogonal_gain: float):
    """``kernel_init`` ``orthogonal`` (with this layer's gain) or ``lecun_uniform`` (gain-free, as in Brax)."""
    return orthogonal(orthogonal_gain) if kind == "orthogonal" else nn.initializers.lecun_uniform()


class MLP(nn.Module):
    """``[..., in] -> [..., hidden_sizes[-1]]``; orthogonal(sqrt 2) or lecun-uniform kernels, zero biases."""

    hidden_sizes: Sequence[int]
    activation: str
    kernel_init: str = "orthogonal"

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        for width in self.hidden_sizes:
            dense = nn.Dense(width, kernel_init=kernel_initializer(self.kernel_init, math.sqrt(2)))
            x = ACTIVATIONS[self.activation](dense(x))
        return x


class ActorCritic(nn.Module):
    """obs ``[..., obs_dim]`` -> (PolicyDist or TanhGaussian with loc ``[..., A]``, value ``[...]``).

    The log-std is ``[A]`` (a parameter) or, with ``state_dependent_std``, ``[..., A]``.

    ``critic_hidden_sizes`` (empty: the same as ``hidden_sizes``) lets the critic be
    wider or deeper than the actor, as in Brax PPO (4x32 policy, 5x256 value);
    ``head_hidden_sizes`` gives each head hidden layers of its own after the torso.
    """

    action_dim: int
    discrete: bool
    hidden_sizes: Sequence[int] = (64, 64)
    activation: str = "tanh"
    shared_torso: bool = False
    squash: bool = False
    critic_hidden_sizes: Sequence[int] = ()
    state_dependent_std: bool = False
    kernel_init: str = "orthogonal"
    head_hidden_sizes: Sequence[int] = ()

    @nn.compact
    def __call__(self, obs: jax.Array) -> tuple[PolicyDist | TanhGaussian, jax.Array]:
        if self.shared_torso:
            actor_h = critic_h = MLP(self.hidden_sizes, self.activation, self.kernel_init, name="torso")(obs)
        else:
            actor_h = MLP(self.hidden_sizes, self.activation, self.kernel_init, name="actor_torso")(obs)
            critic_sizes = self.critic_hidden_sizes or self.hidden_sizes
            critic_h = MLP(critic_sizes, self.activation, self.kernel_init, name="critic_torso")(obs)
        return heads(self, actor_h, critic_h)


def heads(module: nn.Module, actor_h: jax.Array, critic_h: jax.Array) -> tuple[PolicyDist | TanhGaussian, jax.Array]:
    """The policy and value heads of ``module`` (an actor-critic, inside its compact ``__call__``) on the actor's
    and critic's features ``[..., F]``, each through its own ``head_hidden_sizes`` layers first: (distribution
    with loc ``[..., A]``, value ``[...]``)."""
    if module.head_hidden_sizes:
        own = (module.head_hidden_sizes, module.activation, module.kernel_init)
        actor_h, critic_h = MLP(*own, name="policy_head_torso")(actor_h), MLP(*own, name="value_head_torso")(critic_h)
    std_outputs = module.action_dim if module.state_dependent_std and not module.discrete else 0
    head = nn.Dense(
        module.action_dim + std_outputs, kernel_init=kernel_initializer(module.kernel_init, 0.01), name="policy_head"
    )(actor_h)
    value_init = kernel_initializer(module.kernel_init, 1.0)
    value = nn.Dense(1, kernel_init=value_init, name="value_head")(critic_h)[..., 0]
    loc = head[..., : module.action_dim]
    if module.discrete:
        return PolicyDist(loc, None), value
    if std_outputs:
        log_std = jnp.log(jax.nn.softplus(head[..., module.action_dim :]) + MIN_STD)
    else:
        log_std = module.param("log_std", nn.initializers.zeros, (module.action_dim,))
    return (TanhGaussian if module.squash else PolicyDist)(loc, log_std), value
