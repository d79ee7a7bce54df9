"""Actor-critic MLP in Flax linen: one parameter tree, actor and critic evaluated together.

By default the actor and the critic are two separate MLPs; with
``shared_torso`` one MLP feeds both heads. (Stacking both towers into one
batched matmul per layer was measured slower on CPU: the einsum's transposes
cost more than the op it saves.)

Initialization follows Huang et al. (2022), "The 37 Implementation Details of
PPO", detail 2: orthogonal weights with gain sqrt(2) on hidden layers, 0.01 on
the policy head, 1.0 on the value head; zero biases; log-std starts at 0.

The orthogonal matrices come from Gram-Schmidt on a Gaussian matrix, written in
plain jnp ops, rather than from LAPACK's QR: it draws from the same (Haar)
distribution as ``flax.linen.initializers.orthogonal`` but puts no QR custom
call in the program. Under ``vmap`` over seeds a QR becomes a batched LAPACK
call, and with jaxlib 0.10.2 on a 2-core CPU programs holding two such calls
were seen to hang; the usual cure, ``--xla_cpu_enable_concurrency_optimized_scheduler=false``,
costs about 35% of training throughput here, so we avoid the call instead.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
from jax import lax

from ppo_jax.distributions import PolicyDist, TanhGaussian

ACTIVATIONS = {"tanh": jnp.tanh, "relu": jax.nn.relu, "gelu": jax.nn.gelu, "silu": jax.nn.silu}


def gram_schmidt(a: jax.Array) -> jax.Array:
    """Orthonormalize the columns of ``a [n, m]`` (n >= m) in order.

    Classical Gram-Schmidt with one re-orthogonalization pass (CGS2), which is
    as accurate as Householder QR in float32 for full-rank matrices. The result
    equals Q of ``a = QR`` with R's diagonal made positive.
    """
    m = a.shape[1]

    def column(j, q):
        earlier = (jnp.arange(m) < j).astype(a.dtype)  # columns < j are done
        v = q[:, j]
        for _ in range(2):
            v = v - q @ ((q.T @ v) * earlier)
        return q.at[:, j].set(v / jnp.linalg.norm(v))

    return lax.fori_loop(0, m, column, a)


def orthogonal(scale: float = 1.0):
    """Orthogonal initializer for a 2-D kernel ``[in, out]`` (Saxe et al. 2014), QR-free."""

    def init(key, shape, dtype=jnp.float32):
        rows, cols = shape
        tall = jax.random.normal(key, (max(rows, cols), min(rows, cols)), dtype)
        q = gram_schmidt(tall)
        return scale * (q if rows >= cols else q.T)

    return init


class MLP(nn.Module):
    """``[..., in] -> [..., hidden_sizes[-1]]``; orthogonal(sqrt 2) kernels, zero biases."""

    hidden_sizes: Sequence[int]
    activation: str

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        for width in self.hidden_sizes:
            x = ACTIVATIONS[self.activation](nn.Dense(width, kernel_init=orthogonal(math.sqrt(2)))(x))
        return x


class ActorCritic(nn.Module):
    """obs ``[..., obs_dim]`` -> (PolicyDist or TanhGaussian with loc ``[..., A]``, value ``[...]``).

    ``critic_hidden_sizes`` (empty: the same as ``hidden_sizes``) lets the critic be
    wider or deeper than the actor, as in Brax PPO (4x32 policy, 5x256 value).
    """

    action_dim: int
    discrete: bool
    hidden_sizes: Sequence[int] = (64, 64)
    activation: str = "tanh"
    shared_torso: bool = False
    squash: bool = False
    critic_hidden_sizes: Sequence[int] = ()

    @nn.compact
    def __call__(self, obs: jax.Array) -> tuple[PolicyDist | TanhGaussian, jax.Array]:
        if self.shared_torso:
            actor_h = critic_h = MLP(self.hidden_sizes, self.activation, name="torso")(obs)
        else:
            actor_h = MLP(self.hidden_sizes, self.activation, name="actor_torso")(obs)
            critic_sizes = self.critic_hidden_sizes or self.hidden_sizes
            critic_h = MLP(critic_sizes, self.activation, name="critic_torso")(obs)
        loc = nn.Dense(self.action_dim, kernel_init=orthogonal(0.01), name="policy_head")(actor_h)
        value = nn.Dense(1, kernel_init=orthogonal(1.0), name="value_head")(critic_h)[..., 0]
        if self.discrete:
            return PolicyDist(loc, None), value
        log_std = self.param("log_std", nn.initializers.zeros, (self.action_dim,))
        return (TanhGaussian if self.squash else PolicyDist)(loc, log_std), value


def make_network(cfg) -> ActorCritic:
    """The ActorCritic of a PPOConfig: its env's action space, cfg's widths, activation and torso."""
    from ppo_jax.envs import env_spec  # gymnax starts a JAX backend: imported on first use (see ppo_jax.task)

    spec = env_spec(cfg)
    return ActorCritic(
        action_dim=spec.action_dim,
        discrete=spec.discrete,
        hidden_sizes=tuple(cfg.hidden_sizes),
        activation=cfg.activation,
        shared_torso=cfg.shared_torso,
        squash=cfg.action_dist == "tanh_gaussian",
        critic_hidden_sizes=tuple(cfg.critic_hidden_sizes),
    )
