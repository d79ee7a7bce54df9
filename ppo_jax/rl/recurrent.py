"""A recurrent actor-critic: MLP torso, a GRU (Cho et al. 2014), the feed-forward network's heads.

    memory, (dist, value) = network.apply(params, memory, obs, reset)
    # obs [T, B, obs_dim], reset bool [T, B], memory: one [B, H] state per GRU -> dist loc [T, B, A], value [T, B]

``reset[t, b]`` says that ``obs[t, b]`` is the first observation of an episode: env b's memory is set back to
the initial state (zeros) before the GRU reads it, so no episode sees another's past. The rollout calls the
network with T = 1 per step; the update calls it on whole rollout segments from the memory stored at the
segment's start with the same resets, so it computes the rollout's log-probs again (``ppo_jax.rl.sequences``).

With ``shared_torso`` one MLP and one GRU feed both heads (memory: one state); otherwise the actor and the critic
have their own MLP and GRU (memory: two states, actor's first). GRU kernels are orthogonal (QR-free,
``ppo_jax.initializers``), biases zero.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from ppo_jax.initializers import orthogonal
from ppo_jax.rl.networks import MLP, ActorCritic, heads

Memory = tuple[jax.Array, ...]
"""One ``[B, rnn_hidden_size]`` state per GRU (one with a shared torso, else actor's and critic's)."""


class ResetGRU(nn.Module):
    """``(carry [B, H], x [T, B, in], reset [T, B]) -> (carry [B, H], outputs [T, B, H])``; the carry is zeroed
    where ``reset`` before step t reads ``x[t]``."""

    hidden_size: int

    @nn.compact
    def __call__(self, carry: jax.Array, x: jax.Array, reset: jax.Array) -> tuple[jax.Array, jax.Array]:
        def step(cell, carry, inputs):
            x_t, reset_t = inputs
            carry = jnp.where(reset_t[:, None], jnp.zeros_like(carry), carry)
            return cell(carry, x_t)

        cell = nn.GRUCell(self.hidden_size, kernel_init=orthogonal(1.0), recurrent_kernel_init=orthogonal(1.0))
        scan = nn.scan(step, variable_broadcast="params", split_rngs={"params": False})
        return scan(cell, carry, (x, reset))


class RecurrentActorCritic(ActorCritic):
    """The ``ActorCritic`` of ``ppo_jax.rl.networks`` (its fields) with a GRU of ``rnn_hidden_size`` after each
    MLP torso."""

    rnn_hidden_size: int = 128

    @nn.compact
    def __call__(self, memory: Memory, obs: jax.Array, reset: jax.Array):
        if self.shared_torso:
            x = MLP(self.hidden_sizes, self.activation, self.kernel_init, name="torso")(obs)
            carry, actor_h = ResetGRU(self.rnn_hidden_size, name="gru")(memory[0], x, reset)
            critic_h, memory = actor_h, (carry,)
        else:
            x = MLP(self.hidden_sizes, self.activation, self.kernel_init, name="actor_torso")(obs)
            actor_carry, actor_h = ResetGRU(self.rnn_hidden_size, name="actor_gru")(memory[0], x, reset)
            critic_sizes = self.critic_hidden_sizes or self.hidden_sizes
            y = MLP(critic_sizes, self.activation, self.kernel_init, name="critic_torso")(obs)
            critic_carry, critic_h = ResetGRU(self.rnn_hidden_size, name="critic_gru")(memory[1], y, reset)
            memory = (actor_carry, critic_carry)
        return memory, heads(self, actor_h, critic_h)

    def initial_memory(self, batch: int) -> Memory:
        """The state every episode starts from: zeros, one ``[batch, rnn_hidden_size]`` per GRU."""
        zeros = jnp.zeros((batch, self.rnn_hidden_size), jnp.float32)
        return (zeros,) if self.shared_torso else (zeros, zeros)
