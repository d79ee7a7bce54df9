"""The Llama / Qwen decoder family as pure functions over a parameter pytree, with a key-value cache.

One pre-norm block per layer (Touvron et al. 2023; Yang et al. 2024, 2025), the
layers' parameters stacked on a leading axis and run by ``lax.scan``::

    h = x + o(Attn(RoPE(q(n1(x))), RoPE(k(n1(x))), v(n1(x))))     n1, n2: RMSNorm (Zhang & Sennrich 2019)
    x' = h + down(silu(gate(n2(h))) * up(n2(h)))                   SwiGLU (Shazeer 2020)

Attention is grouped-query (Ainslie et al. 2023): ``num_kv_heads`` key/value heads,
each shared by ``num_heads / num_kv_heads`` query heads; Qwen2 adds a bias to q, k
and v, Qwen3 an RMSNorm over each query and key head before the rotation. The
embedding is tied to the LM head or not, as the config says.

Parameters (``init_params``, or ``checkpoints.load_checkpoint``), ``L`` layers,
``D`` hidden size, ``H``/``K`` query/key-value heads of ``Dh`` dims, ``F`` MLP width:
``embed [V, D]``, ``norm [D]``, ``head [D, out]`` (absent when tied), and under
``layers`` each with a leading ``[L]``: ``attention_norm [D]``, ``q [D, H*Dh]``,
``k``/``v [D, K*Dh]``, ``o [H*Dh, D]``, optional ``q_bias``/``k_bias``/``v_bias``
and ``o_bias``, ``q_norm``/``k_norm [Dh]``, ``mlp_norm [D]``, ``gate``/``up [D, F]``,
``down [F, D]``. Kernels are ``[in, out]`` (Hugging Face stores ``[out, in]``).
LoRA (``lora.with_base``) adds ``<name>_lora_a [L, in, r]`` and ``<name>_lora_b [L, r, out]`` beside a kernel.

Batches may be left-padded: ``attention_mask [B, T]`` is 0 on padding, a token's
rotary position is the number of real tokens before it (as transformers' generate
counts them), and no token attends to padding. Logits are float32 whatever the
compute dtype.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ppo_jax.initializers import orthogonal
from ppo_jax.lm import sampling, sharding
from ppo_jax.lm.decoder_config import DecoderConfig
from ppo_jax.lm.rope import rotate, rotation


@dataclasses.dataclass(frozen=True)
class Decoder:
    """A decoder and its output head: ``out_dim`` 0 is the LM head over the vocabulary, else a fresh linear head."""

    config: DecoderConfig
    out_dim: int = 0  # 0: logits over the vocabulary (the policy); 1: a value or reward model
    head_gain: float = 1.0  # orthogonal init gain of a fresh head (0.01 for a fresh policy)
    remat: bool = False  # recompute each layer's activations in the backward pass (``forward``)

    @property
    def has_head(self) -> bool:
        return self.out_dim > 0 or not self.config.tie_word_embeddings

    def apply(self, params: dict, tokens: jax.Array) -> jax.Array:
        """``run(self, params, tokens)``: a TrainState's ``apply_fn``."""
        return run(self, params, tokens)


class KVCache(NamedTuple):
    keys: jax.Array  # [L, B, S, K, Dh] compute dtype
    values: jax.Array  # [L, B, S, K, Dh]


class Generation(NamedTuple):
    tokens: jax.Array  # [B, N] int32; a finished row is filled with the config's fill token
    log_probs: jax.Array  # [B, N] float32: of each token under the distribution it was drawn from (0 after the end)


def _dtype(name: str):
    return jnp.dtype(name)


def param_shapes(model: Decoder) -> dict:
    """The parameter pytree's shapes (tuples), by name."""
    c = model.config
    L, D, F = c.num_layers, c.hidden_size, c.intermediate_size
    q_dim, kv_dim = c.num_heads * c.head_dim, c.num_kv_heads * c.head_dim
    layers = {
        "attention_norm": (L, D),
        "q": (L, D, q_dim),
        "k": (L, D, kv_dim),
        "v": (L, D, kv_dim),
        "o": (L, q_dim, D),
        "mlp_norm": (L, D),
        "gate": (L, D, F),
        "up": (L, D, F),
        "down": (L, F, D),
    }
    if c.qkv_bias:
        layers |= {"q_bias": (L, q_dim), "k_bias": (L, kv_dim), "v_bias": (L, kv_dim)}
    if c.o_bias:
        layers["o_bias"] = (L, D)
    if c.qk_norm:
        layers |= {"q_norm": (L, c.head_dim), "k_norm": (L, c.head_dim)}
    shapes = {"embed": (c.vocab_size, D), "layers": layers, "norm": (D,)}
    if model.has_head:
        shapes["head"] = (D, model.out_dim or c.vocab_size)
    return shapes


def init_params(model: Decoder, key: jax.Array) -> dict:
    """Fresh parameters: kernels normal with std 1/sqrt(fan_in) and embeddings 1/sqrt(D) (LeCun et al. 1998; Flax's
    defaults, as the lab's other models), norms 1, biases 0; a fresh head orthogonal with gain ``head_gain``.

    Not transformers' fixed std 0.02 (its ``initializer_range``): that is about 1/sqrt(fan_in) at widths in the
    thousands, and far smaller at the lab's widths.
    """
    dtype = _dtype(model.config.param_dtype)
    shapes = param_shapes(model)
    flat, tree = jax.tree_util.tree_flatten_with_path(shapes, is_leaf=lambda x: isinstance(x, tuple))
    keys = jax.random.split(key, len(flat))
    leaves = []
    for (path, shape), leaf_key in zip(flat, keys, strict=True):
        name = path[-1].key
        if name.endswith("norm"):
            leaves.append(jnp.ones(shape, dtype))
        elif name.endswith("bias"):
            leaves.append(jnp.zeros(shape, dtype))
        elif name == "head":
            leaves.append(orthogonal(model.head_gain)(leaf_key, shape, jnp.float32).astype(dtype))
        else:  # layer kernels [L, in, out] and the embedding [V, D]: fan-in in, resp. D
            fan_in = shape[-1] if name == "embed" else shape[-2]
            leaves.append((jax.random.normal(leaf_key, shape, jnp.float32) / np.sqrt(fan_in)).astype(dtype))
    return jax.tree_util.tree_unflatten(tree, leaves)


def rms_norm(x: jax.Array, weight: jax.Array, eps: float) -> jax.Array:
    """``weight * x / sqrt(mean(x^2) + eps)`` over the last axis, the statistics in float32 (as transformers)."""
    x32 = x.astype(jnp.float32)
    normed = x32 * lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + eps)
    return weight.astype(x.dtype) * normed.astype(x.dtype)


def attend(query: jax.Array, keys: jax.Array, values: jax.Array, visible: jax.Array) -> jax.Array:
    """Grouped-query attention: ``query [B, T, H, Dh]`` over ``keys, values [B, S, K, Dh]`` -> ``[B, T, H, Dh]``.

    ``visible [B, T, S]``: which cache positions each query sees. Softmax in float32.
    """
    B, T, H, Dh = query.shape
    K = keys.shape[2]
    grouped = query.reshape(B, T, K, H // K, Dh)
    scores = jnp.einsum("btkgd,bskd->bkgts", grouped, keys, preferred_element_type=jnp.float32) * Dh**-0.5
    scores = jnp.where(visible[:, None, None], scores, jnp.finfo(jnp.float32).min)
    weights = jax.nn.softmax(scores, axis=-1).astype(values.dtype)
    return jnp.einsum("bkgts,bskd->btkgd", weights, values).reshape(B, T, H, Dh)


def _linear(h: jax.Array, layer: dict, name: str) -> jax.Array:
    """``h @ W`` for kernel ``name``, plus its bias if any and its LoRA term ``(h @ A) @ B`` if ``with_base`` attached
    adapters (``<name>_lora_a [in, r]``, ``<name>_lora_b [r, out]`` already scaled by alpha / r; ``lora.py``)."""
    out = h @ layer[name].astype(h.dtype)
    if f"{name}_lora_a" in layer:
        out = out + (h @ layer[f"{name}_lora_a"].astype(h.dtype)) @ layer[f"{name}_lora_b"].astype(h.dtype)
    if f"{name}_bias" in layer:
        out = out + layer[f"{name}_bias"].astype(h.dtype)
    return out


def _project(h: jax.Array, layer: dict, name: str, heads: int) -> jax.Array:
    return _linear(h, layer, name).reshape(*h.shape[:-1], heads, -1)


def block(
    config: DecoderConfig,
    layer: dict,
    x: jax.Array,
    cache_keys: jax.Array,
    cache_values: jax.Array,
    rope: tuple[jax.Array, jax.Array],
    visible: jax.Array,
    start: jax.Array,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """One layer on ``x [B, T, D]`` written at cache positions ``start ..``: ``(x, cache_keys, cache_values)``."""
    eps = config.rms_norm_eps
    h = rms_norm(x, layer["attention_norm"], eps)
    query = _project(h, layer, "q", config.num_heads)
    key = _project(h, layer, "k", config.num_kv_heads)
    value = _project(h, layer, "v", config.num_kv_heads)
    if config.qk_norm:
        query, key = rms_norm(query, layer["q_norm"], eps), rms_norm(key, layer["k_norm"], eps)
    query, key = rotate(query, *rope), rotate(key, *rope)
    cache_keys = lax.dynamic_update_slice(cache_keys, key.astype(cache_keys.dtype), (0, start, 0, 0))
    cache_values = lax.dynamic_update_slice(cache_values, value.astype(cache_values.dtype), (0, start, 0, 0))
    attended = attend(query, cache_keys, cache_values, visible).reshape(*x.shape[:-1], -1)
    x = x + _linear(attended, layer, "o")
    h = rms_norm(x, layer["mlp_norm"], eps)
    gated = jax.nn.silu(_linear(h, layer, "gate")) * _linear(h, layer, "up")
    return x + _linear(gated, layer, "down"), cache_keys, cache_values


def empty_cache(model: Decoder, batch_size: int, length: int) -> KVCache:
    c = model.config
    shape = (c.num_layers, batch_size, length, c.num_kv_heads, c.head_dim)
    zeros = jnp.zeros(shape, _dtype(c.compute_dtype))
    return sharding.constrain_cache(KVCache(zeros, zeros))  # on a mesh: batch over (data, fsdp), heads over tensor


def forward(
    model: Decoder,
    params: dict,
    tokens: jax.Array,
    positions: jax.Array,
    key_mask: jax.Array,
    cache: KVCache,
    start: jax.Array | int,
) -> tuple[jax.Array, KVCache]:
    """``tokens [B, T]`` at rotary ``positions [B, T]``, written at cache index ``start ..``.

    ``key_mask [B, S]`` (S the cache length): 1 where a cache position holds a real
    token; a query sees the real cache positions at or before its own index.
    Returns ``(outputs [B, T, out] float32, cache)``. With ``model.remat`` each layer of the scan is a
    ``jax.checkpoint`` saving nothing but its input (policy ``nothing_saveable``): the backward pass recomputes the
    layer, so activation memory is one layer's plus ``L`` hidden states instead of every layer's intermediates.
    """
    c = model.config
    compute = _dtype(c.compute_dtype)
    x = jnp.take(params["embed"], tokens, axis=0).astype(compute)
    rope = rotation(c.rope.inverse_frequencies(c.head_dim), positions)
    query_index = start + jnp.arange(tokens.shape[1])
    visible = key_mask.astype(bool)[:, None, :] & (jnp.arange(key_mask.shape[1]) <= query_index[:, None])[None]

    def layer_step(x, layer_and_cache):
        layer, cache_keys, cache_values = layer_and_cache
        x, cache_keys, cache_values = block(c, layer, x, cache_keys, cache_values, rope, visible, start)
        return x, (cache_keys, cache_values)

    if model.remat:  # keep each layer's input only; the backward pass recomputes the rest (Chen et al. 2016)
        layer_step = jax.checkpoint(layer_step, policy=jax.checkpoint_policies.nothing_saveable)
    x, (keys, values) = lax.scan(layer_step, x, (params["layers"], cache.keys, cache.values))
    x = rms_norm(x, params["norm"], c.rms_norm_eps)
    head = params["head"] if model.has_head else params["embed"].T
    outputs = jnp.dot(x, head.astype(compute), preferred_element_type=jnp.float32)
    return outputs, KVCache(keys, values)


def positions_from_mask(attention_mask: jax.Array) -> jax.Array:
    """Rotary positions ``[B, T]`` of a left-padded batch: real tokens count from 0, padding gets 1 (as transformers)."""
    mask = attention_mask.astype(jnp.int32)
    return jnp.where(mask == 1, jnp.cumsum(mask, axis=-1) - 1, 1)


def logits(model: Decoder, params: dict, tokens: jax.Array, attention_mask: jax.Array) -> jax.Array:
    """Outputs ``[B, T, out]`` float32 for ``tokens [B, T]`` (one causal pass; ``attention_mask`` 0 on left padding)."""
    cache = empty_cache(model, *tokens.shape)
    return forward(model, params, tokens, positions_from_mask(attention_mask), attention_mask, cache, 0)[0]


def padding_mask(model: Decoder, tokens: jax.Array) -> jax.Array:
    """``[B, T]`` int32: 0 on a row's left padding (the pad tokens before its first other token), 1 elsewhere.

    A pad token after that (one a policy sampled inside its response, or the fill after an EOS) is a token like any
    other, as ``decode`` fed it to the sampler: masking it would change the context of every later token, so the
    trainer's log-probs would differ from the sampler's (17 nats on a response of the lab's SFT decoder that sampled
    a PAD: ``rollout_correction.py``'s mismatch_kl).
    """
    if model.config.pad_token_id is None:
        return jnp.ones_like(tokens)
    return (jnp.cumsum(tokens != model.config.pad_token_id, axis=-1) > 0).astype(jnp.int32)


def run(model: Decoder, params: dict, tokens: jax.Array) -> jax.Array:
    """Outputs ``[B, T, out]`` for ``tokens [B, T]`` (the lab's interface, ``models.run``); left padding is masked.

    A prompt may be left-padded (``padding_mask``); the fill after a response's EOS is
    attended to as ``decode`` did, which changes no output at or before the EOS (causal attention).
    """
    return logits(model, params, tokens, padding_mask(model, tokens))


def decode(
    model: Decoder,
    params: dict,
    tokens: jax.Array,
    attention_mask: jax.Array,
    max_new_tokens: int,
    key: jax.Array,
    params_sampling: sampling.SamplingParams,
) -> Generation:
    """``max_new_tokens`` tokens after the left-padded prompts ``tokens [B, P]`` from a KV cache of ``P + N`` positions.

    One pass over the prompts fills the cache; then one token per ``lax.scan`` step,
    drawn by ``sampling.sample`` with key ``i`` of ``jax.random.split(key, N)``
    (temperature 0: greedy). A row ends at its first EOS; after it, the fill token.
    """
    c = model.config
    batch_size, prompt_len = tokens.shape
    length = prompt_len + max_new_tokens
    key_mask = jnp.concatenate([attention_mask, jnp.ones((batch_size, max_new_tokens), attention_mask.dtype)], axis=1)
    prompt_out, cache = forward(
        model, params, tokens, positions_from_mask(attention_mask), key_mask, empty_cache(model, batch_size, length), 0
    )
    next_position = jnp.sum(attention_mask.astype(jnp.int32), axis=-1)  # [B]
    eos = jnp.asarray(c.eos_token_ids or (-1,), jnp.int32)

    def step(state, xs):
        cache, last, finished = state
        step_key, index = xs
        token, log_prob = sampling.sample(step_key, last, params_sampling)
        token = jnp.where(finished, c.fill_token_id, token)
        log_prob = jnp.where(finished, 0.0, log_prob)
        out, cache = forward(
            model, params, token[:, None], (next_position + index)[:, None], key_mask, cache, prompt_len + index
        )
        finished = finished | jnp.isin(token, eos)
        return (cache, out[:, 0], finished), (token, log_prob)

    state = (cache, prompt_out[:, -1], jnp.zeros((batch_size,), bool))
    xs = (jax.random.split(key, max_new_tokens), jnp.arange(max_new_tokens))
    _, (new_tokens, log_probs) = lax.scan(step, state, xs)
    return Generation(new_tokens.T.astype(jnp.int32), log_probs.T)


def greedy(model: Decoder, params: dict, tokens: jax.Array, attention_mask: jax.Array, max_new_tokens: int):
    """``[B, max_new_tokens]`` int32 greedy continuations of left-padded ``tokens [B, P]``."""
    greedy_params = sampling.sampling_params(temperature=0.0)
    return decode(model, params, tokens, attention_mask, max_new_tokens, jax.random.key(0), greedy_params).tokens


def generate(
    model: Decoder,
    params: dict,
    key: jax.Array,
    prompt: jax.Array,
    max_response_len: int,
    knobs: sampling.SamplingParams | None = None,
) -> jax.Array:
    """Responses ``[B, L]`` sampled with ``knobs`` (None: temperature 1) for ``prompt [B, P]``, left-padded with the
    pad token (the lab's ``models.generate``)."""
    return sample(model, params, key, prompt, max_response_len, knobs)[0]


def sample(
    model: Decoder,
    params: dict,
    key: jax.Array,
    prompt: jax.Array,
    max_response_len: int,
    knobs: sampling.SamplingParams | None = None,
) -> Generation:
    """``generate``'s responses ``[B, L]`` and the log-prob ``[B, L]`` (float32) each token was drawn with, 0 after
    the first EOS, computed in the model's compute dtype (the lab's ``models.sample``)."""
    mask = padding_mask(model, prompt)
    knobs = sampling.sampling_params() if knobs is None else knobs
    return decode(model, params, prompt, mask, max_response_len, key, knobs)


def parameter_count(model: Decoder) -> int:
    return int(sum(np.prod(s) for s in jax.tree.leaves(param_shapes(model), is_leaf=lambda x: isinstance(x, tuple))))
