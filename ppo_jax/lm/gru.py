"""A small recurrent language model in Flax linen (``cfg.model = "gru"``): actor, reference, critic, reward model.

``SeqModel`` maps one token and a GRU carry to the next carry and an output:
logits over the vocabulary (actor, reference; ``out_dim = vocab_size``) or a
scalar (critic, reward model; ``out_dim = 1``). A GRU rather than a Transformer:
sampling is a ``lax.scan`` over a ``[B, hidden]`` carry, with no key-value cache,
and the same cell scores whole sequences with teacher forcing, so the log-probs
of sampling and of training come from one code path (the PPO ratio starts at 1).

Weights: orthogonal recurrent kernels and heads (Huang et al. 2022, detail 2),
via the QR-free ``ppo_jax.initializers.orthogonal``; the head gain is 0.01 for a
fresh policy, 1.0 for values and scores.

Shapes: tokens ``[B, T]`` int32, outputs ``[B, T, out_dim]``; a sequence is the
prompt ``[B, P]`` followed by the response ``[B, L]``. The output at position t
is computed from tokens ``0..t`` and predicts token ``t + 1`` (causal).
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
from jax import lax

from ppo_jax.initializers import orthogonal
from ppo_jax.lm import sampling
from ppo_jax.lm.tokens import EOS, PAD


class SeqModel(nn.Module):
    """Embedding -> GRU cell -> linear head, one token per call."""

    vocab_size: int
    embed_dim: int
    hidden_dim: int
    out_dim: int
    head_gain: float = 1.0

    def setup(self):
        self.embed = nn.Embed(self.vocab_size, self.embed_dim)
        self.cell = nn.GRUCell(self.hidden_dim, recurrent_kernel_init=orthogonal(1.0))
        self.head = nn.Dense(self.out_dim, kernel_init=orthogonal(self.head_gain))

    def __call__(self, carry: jax.Array, token: jax.Array) -> tuple[jax.Array, jax.Array]:
        """``carry [..., hidden]``, ``token [...]`` -> ``(carry [..., hidden], output [..., out_dim])``."""
        carry, hidden = self.cell(carry, self.embed(token))
        return carry, self.head(hidden)


def init_params(model: SeqModel, key: jax.Array):
    return model.init(key, jnp.zeros((model.hidden_dim,), jnp.float32), jnp.zeros((), jnp.int32))


def _scan(model: SeqModel, params, carry: jax.Array, tokens: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Feed ``tokens [B, T]`` from ``carry [B, hidden]``: ``(final carry, outputs [B, T, out_dim])``."""

    def step(c, token):
        return model.apply(params, c, token)

    carry, outputs = lax.scan(step, carry, tokens.T)
    return carry, jnp.swapaxes(outputs, 0, 1)


def run(model: SeqModel, params, tokens: jax.Array) -> jax.Array:
    """Outputs ``[B, T, out_dim]`` for ``tokens [B, T]`` from a zero carry (teacher forcing)."""
    carry = jnp.zeros(tokens.shape[:1] + (model.hidden_dim,), jnp.float32)
    return _scan(model, params, carry, tokens)[1]


def generate(
    model: SeqModel,
    params,
    key: jax.Array,
    prompt: jax.Array,
    max_response_len: int,
    knobs: sampling.SamplingParams | None = None,
) -> jax.Array:
    """Sample responses ``[B, L]`` for ``prompt [B, P]`` with ``sampling.sample`` (``knobs``; None: temperature 1,
    no truncation); PAD after the first EOS."""
    return sample(model, params, key, prompt, max_response_len, knobs)[0]


def sample(
    model: SeqModel,
    params,
    key: jax.Array,
    prompt: jax.Array,
    max_response_len: int,
    knobs: sampling.SamplingParams | None = None,
) -> tuple[jax.Array, jax.Array]:
    """``generate``'s responses ``[B, L]`` and the log-prob ``[B, L]`` (float32) each token was drawn with, 0 after
    the first EOS (the lab's ``models.sample``)."""
    knobs = sampling.sampling_params() if knobs is None else knobs
    carry = jnp.zeros(prompt.shape[:1] + (model.hidden_dim,), jnp.float32)
    carry, outputs = _scan(model, params, carry, prompt)
    ended = jnp.zeros(prompt.shape[:1], bool)

    def step(state, step_key):
        carry, logits, ended = state
        token, log_prob = sampling.sample(step_key, logits, knobs)
        token, log_prob = jnp.where(ended, PAD, token), jnp.where(ended, 0.0, log_prob)
        carry, logits = model.apply(params, carry, token)
        return (carry, logits, ended | (token == EOS)), (token, log_prob)

    _, (response, log_probs) = lax.scan(step, (carry, outputs[:, -1], ended), jax.random.split(key, max_response_len))
    return response.T, log_probs.T
