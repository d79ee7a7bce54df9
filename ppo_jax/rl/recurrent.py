"""A recurrent actor-critic: MLP torso, a GRU (Cho et al. 2014) or an LSTM (Hochreiter & Schmidhuber 1997),
the feed-forward network's heads.

    memory, (dist, value) = network.apply(params, memory, obs, reset)
    # obs [T, B, obs_dim], reset bool [T, B], memory: one state per recurrent layer (GRU: [B, H]; LSTM: (c, h),
    # each [B, H]) -> dist loc [T, B, A], value [T, B]

``reset[t, b]`` says that ``obs[t, b]`` is the first observation of an episode: env b's memory is set back to
the initial state (zeros) before the GRU reads it, so no episode sees another's past. The rollout calls the
network with T = 1 per step; the update calls it on whole rollout segments from the memory stored at the
segment's start with the same resets, so it computes the rollout's log-probs again (``ppo_jax.rl.sequences``).

With ``shared_torso`` one MLP and one recurrent layer feed both heads (memory: one state); otherwise the actor
and the critic have their own (memory: two states, actor's first). Kernels are orthogonal (QR-free,
``ppo_jax.initializers``), biases zero.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from ppo_jax.initializers import orthogonal
from ppo_jax.rl.networks import MLP, ActorCritic, heads

Memory = tuple
"""One state per recurrent layer (one with a shared torso, else actor's and critic's): a GRU's ``[B, H]``, an
LSTM's ``(c, h)``."""

CELLS = {"gru": nn.GRUCell, "lstm": nn.OptimizedLSTMCell}


class ResetRNN(nn.Module):
    """``(carry, x [T, B, in], reset [T, B]) -> (carry, outputs [T, B, H])`` for a ``cell`` of ``CELLS``; every
    array of the carry is zeroed where ``reset`` before step t reads ``x[t]``."""

    cell: str
    hidden_size: int

    @nn.compact
    def __call__(self, carry, x: jax.Array, reset: jax.Array):
        def step(cell, carry, inputs):
            x_t, reset_t = inputs
            carry = jax.tree.map(lambda c: jnp.where(reset_t[:, None], jnp.zeros_like(c), c), carry)
            return cell(carry, x_t)

        cell = CELLS[self.cell](self.hidden_size, kernel_init=orthogonal(1.0), recurrent_kernel_init=orthogonal(1.0))
        scan = nn.scan(step, variable_broadcast="params", split_rngs={"params": False})
        return scan(cell, carry, (x, reset))


class RecurrentActorCritic(ActorCritic):
    """The ``ActorCritic`` of ``ppo_jax.rl.networks`` (its fields) with a recurrent layer (``cell``: gru or lstm)
    of ``rnn_hidden_size`` units after each MLP torso."""

    rnn_hidden_size: int = 128
    cell: str = "gru"

    @nn.compact
    def __call__(self, memory: Memory, obs: jax.Array, reset: jax.Array):
        if self.shared_torso:
            x = MLP(self.hidden_sizes, self.activation, self.kernel_init, name="torso")(obs)
            carry, actor_h = ResetRNN(self.cell, self.rnn_hidden_size, name=self.cell)(memory[0], x, reset)
            critic_h, memory = actor_h, (carry,)
        else:
            x = MLP(self.hidden_sizes, self.activation, self.kernel_init, name="actor_torso")(obs)
            actor_carry, actor_h = ResetRNN(self.cell, self.rnn_hidden_size, name=f"actor_{self.cell}")(
                memory[0], x, reset
            )
            critic_sizes = self.critic_hidden_sizes or self.hidden_sizes
            y = MLP(critic_sizes, self.activation, self.kernel_init, name="critic_torso")(obs)
            critic_carry, critic_h = ResetRNN(self.cell, self.rnn_hidden_size, name=f"critic_{self.cell}")(
                memory[1], y, reset
            )
            memory = (actor_carry, critic_carry)
        return memory, heads(self, actor_h, critic_h)

    def initial_memory(self, batch: int) -> Memory:
        """The state every episode starts from: zeros (``[batch, rnn_hidden_size]``; an LSTM's c and h both)."""
        zeros = jnp.zeros((batch, self.rnn_hidden_size), jnp.float32)
        state = (zeros, zeros) if self.cell == "lstm" else zeros
        return (state,) if self.shared_torso else (state, state)
