"""A small causal decoder-only Transformer, with the same interface as the GRU in ``gru.py``.

``Decoder`` is a GPT-2 style stack (Radford et al. 2019, section 2.3): learned
token and absolute position embeddings, pre-LayerNorm blocks
``x + Attn(LN(x))`` and ``x + MLP(LN(x))`` (GELU, tanh approximation, hidden
width ``4 * model_dim``), a final LayerNorm and a linear head with an orthogonal
kernel of gain ``head_gain`` (0.01 for a fresh policy, 1.0 for values and scores).
Attention is causal multi-head scaled dot-product attention (Vaswani et al.
2017, section 3.2), written out with einsums.

Every forward pass reads and writes an explicit key-value cache (``KVCache``):
the ``T`` new tokens sit at positions ``start .. start + T - 1``, their keys and
values are written into the cache there, and each attends to the cache positions
at or before its own. ``run`` is one pass over a fresh cache of length ``T``;
``generate`` prefills a cache of length ``max_len`` with one pass over the
prompt, then decodes one token per ``lax.scan`` step.

Shapes: tokens ``[B, T]`` int32, outputs ``[B, T, out_dim]``; a sequence is the
prompt ``[B, P]`` followed by the response ``[B, L]``, ``P + L <= max_len``. The
output at position t is computed from tokens ``0..t`` and predicts token ``t + 1``.
"""

from __future__ import annotations

from typing import NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
from jax import lax

from ppo_jax.initializers import orthogonal
from ppo_jax.lm import sampling
from ppo_jax.lm.tokens import EOS, PAD


class KVCache(NamedTuple):
    """Keys and values of every layer at every cached position."""

    keys: jax.Array  # [num_layers, B, S, num_heads, head_dim]
    values: jax.Array  # [num_layers, B, S, num_heads, head_dim]


class Generation(NamedTuple):
    """Sampled responses and the outputs they were sampled from."""

    response: jax.Array  # [B, L] int32, PAD after the first EOS
    outputs: jax.Array  # [B, L, out_dim]: row i is the output that response token i was drawn from


def attend(query: jax.Array, keys: jax.Array, values: jax.Array, query_positions: jax.Array) -> jax.Array:
    """Causal attention of ``query [B, T, H, Dh]`` over ``keys, values [B, S, H, Dh]``: ``[B, T, H, Dh]``.

    Query t (at sequence position ``query_positions[t]``) sees cache positions
    ``<= query_positions[t]``; it always sees itself, so no row is fully masked.
    """
    scores = jnp.einsum("bthd,bshd->bhts", query, keys) / jnp.sqrt(query.shape[-1]).astype(query.dtype)
    visible = jnp.arange(keys.shape[1])[None, :] <= query_positions[:, None]  # [T, S]
    weights = jax.nn.softmax(jnp.where(visible, scores, -jnp.inf), axis=-1)
    return jnp.einsum("bhts,bshd->bthd", weights, values)


class Block(nn.Module):
    """Pre-LayerNorm Transformer block: ``x + Attn(LN(x))``, then ``x + MLP(LN(x))``."""

    num_heads: int

    @nn.compact
    def __call__(
        self, x: jax.Array, keys: jax.Array, values: jax.Array, start: jax.Array
    ) -> tuple[jax.Array, jax.Array, jax.Array]:
        """``x [B, T, D]`` at positions ``start ..``; ``keys, values [B, S, H, Dh]`` -> updated ``(x, keys, values)``."""
        model_dim = x.shape[-1]
        heads = (self.num_heads, model_dim // self.num_heads)
        h = nn.LayerNorm(name="attention_norm")(x)
        query = nn.DenseGeneral(heads, name="query")(h)
        keys = lax.dynamic_update_slice(keys, nn.DenseGeneral(heads, name="key")(h), (0, start, 0, 0))
        values = lax.dynamic_update_slice(values, nn.DenseGeneral(heads, name="value")(h), (0, start, 0, 0))
        attended = attend(query, keys, values, start + jnp.arange(x.shape[1]))
        x = x + nn.DenseGeneral(model_dim, axis=(-2, -1), name="attention_out")(attended)
        h = nn.LayerNorm(name="mlp_norm")(x)
        h = nn.Dense(model_dim, name="mlp_out")(nn.gelu(nn.Dense(4 * model_dim, name="mlp_hidden")(h)))
        return x + h, keys, values


class Decoder(nn.Module):
    """Token + position embeddings -> ``num_layers`` pre-LN blocks -> LayerNorm -> linear head."""

    vocab_size: int
    max_len: int  # longest sequence (prompt + response): position embeddings and generate's cache
    model_dim: int
    num_layers: int
    num_heads: int  # divides model_dim
    out_dim: int  # vocab_size for a policy, 1 for a critic or reward model
    head_gain: float = 1.0

    @nn.compact
    def __call__(self, tokens: jax.Array, cache: KVCache, start: jax.Array) -> tuple[jax.Array, KVCache]:
        """``tokens [B, T]`` at positions ``start .. start + T - 1`` -> ``(outputs [B, T, out_dim], cache)``."""
        positions = start + jnp.arange(tokens.shape[1])
        x = nn.Embed(self.vocab_size, self.model_dim, name="token_embed")(tokens)
        x = x + nn.Embed(self.max_len, self.model_dim, name="position_embed")(positions)
        keys, values = [], []
        for layer in range(self.num_layers):
            x, k, v = Block(self.num_heads, name=f"block_{layer}")(x, cache.keys[layer], cache.values[layer], start)
            keys.append(k)
            values.append(v)
        x = nn.LayerNorm(name="final_norm")(x)
        outputs = nn.Dense(self.out_dim, kernel_init=orthogonal(self.head_gain), name="head")(x)
        return outputs, KVCache(jnp.stack(keys), jnp.stack(values))


def empty_cache(model: Decoder, batch_size: int, length: int) -> KVCache:
    """A zero ``KVCache`` holding ``length`` positions."""
    head_dim = model.model_dim // model.num_heads
    shape = (model.num_layers, batch_size, length, model.num_heads, head_dim)
    return KVCache(jnp.zeros(shape, jnp.float32), jnp.zeros(shape, jnp.float32))


def init_params(model: Decoder, key: jax.Array):
    """Parameters of ``model``; no shape depends on B or T."""
    if model.model_dim % model.num_heads:
        raise ValueError(f"model_dim {model.model_dim} is not a multiple of num_heads {model.num_heads}")
    return model.init(key, jnp.zeros((1, 1), jnp.int32), empty_cache(model, 1, 1), jnp.zeros((), jnp.int32))


def run(model: Decoder, params, tokens: jax.Array) -> jax.Array:
    """Outputs ``[B, T, out_dim]`` for ``tokens [B, T]``, ``T <= max_len`` (teacher forcing, one causal pass)."""
    batch_size, length = tokens.shape
    if length > model.max_len:
        raise ValueError(f"{length} tokens exceed max_len {model.max_len}")
    cache = empty_cache(model, batch_size, length)
    return model.apply(params, tokens, cache, jnp.zeros((), jnp.int32))[0]


def generate_with_outputs(
    model: Decoder,
    params,
    key: jax.Array,
    prompt: jax.Array,
    max_response_len: int,
    knobs: sampling.SamplingParams | None = None,
    *,
    use_cache: bool = True,
) -> Generation:
    """Sample responses for ``prompt [B, P]`` with ``knobs`` (None: temperature 1), keeping the outputs sampled from
    (``_draw``)."""
    response, outputs, _ = _draw(model, params, key, prompt, max_response_len, knobs, use_cache)
    return Generation(response, outputs)


def _draw(model, params, key, prompt, max_response_len, knobs, use_cache):
    """``(response [B, L], outputs [B, L, out_dim], log_probs [B, L] float32)``, the log-probs as ``sampling.sample``
    returned them (0 after the first EOS).

    Step i draws ``sampling.sample`` with key i of
    ``jax.random.split(key, max_response_len)``, as ``models.generate`` does;
    tokens after the first EOS are PAD. ``use_cache=True`` prefills a
    ``KVCache`` of ``max_len`` positions with one pass over the prompt, then feeds
    one token per step (O(T) attention per token). ``use_cache=False`` reruns the
    full causal pass over a ``[B, max_len]`` buffer at every step and reads the
    current position (O(T^2) per token); both draw the same tokens.
    """
    batch_size, prompt_len = prompt.shape
    if prompt_len + max_response_len > model.max_len:
        raise ValueError(f"prompt {prompt_len} + response {max_response_len} exceed max_len {model.max_len}")
    step_keys = jax.random.split(key, max_response_len)
    positions = prompt_len + jnp.arange(max_response_len)  # where each response token goes
    ended = jnp.zeros((batch_size,), bool)

    knobs = sampling.sampling_params() if knobs is None else knobs

    def draw_token(step_key, logits, ended):
        token, log_prob = sampling.sample(step_key, logits, knobs)
        return jnp.where(ended, PAD, token), jnp.where(ended, 0.0, log_prob)

    if use_cache:
        prompt_outputs, cache = model.apply(params, prompt, empty_cache(model, batch_size, model.max_len), 0)

        def cached_step(state, xs):
            cache, logits, ended = state
            step_key, position = xs
            token, log_prob = draw_token(step_key, logits, ended)
            outputs, cache = model.apply(params, token[:, None], cache, position)
            return (cache, outputs[:, 0], ended | (token == EOS)), (token, logits, log_prob)

        state = (cache, prompt_outputs[:, -1], ended)
        _, (response, outputs, log_probs) = lax.scan(cached_step, state, (step_keys, positions))
    else:
        buffer = jnp.zeros((batch_size, model.max_len), jnp.int32).at[:, :prompt_len].set(prompt)

        def full_step(state, xs):
            buffer, ended = state
            step_key, position = xs
            logits = lax.dynamic_index_in_dim(run(model, params, buffer), position - 1, axis=1, keepdims=False)
            token, log_prob = draw_token(step_key, logits, ended)
            buffer = lax.dynamic_update_slice(buffer, token[:, None], (0, position))
            return (buffer, ended | (token == EOS)), (token, logits, log_prob)

        _, (response, outputs, log_probs) = lax.scan(full_step, (buffer, ended), (step_keys, positions))
    return response.T, jnp.swapaxes(outputs, 0, 1), log_probs.T


def generate(
    model: Decoder,
    params,
    key: jax.Array,
    prompt: jax.Array,
    max_response_len: int,
    knobs: sampling.SamplingParams | None = None,
    *,
    use_cache: bool = True,
) -> jax.Array:
    """Sample responses ``[B, L]`` for ``prompt [B, P]`` with ``knobs`` (None: temperature 1); PAD after the first EOS."""
    return sample(model, params, key, prompt, max_response_len, knobs, use_cache=use_cache)[0]


def sample(
    model: Decoder,
    params,
    key: jax.Array,
    prompt: jax.Array,
    max_response_len: int,
    knobs: sampling.SamplingParams | None = None,
    *,
    use_cache: bool = True,
) -> tuple[jax.Array, jax.Array]:
    """``generate``'s responses ``[B, L]`` and the log-prob ``[B, L]`` (float32) each token was drawn with, 0 after
    the first EOS (the lab's ``models.sample``)."""
    response, _, log_probs = _draw(model, params, key, prompt, max_response_len, knobs, use_cache)
    return response, log_probs
