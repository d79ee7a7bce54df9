"""The decoder's KV-cache sampler against its one-pass forward, and the lab's tiny member of the family."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ppo_jax.lm import decoder, sampling
from ppo_jax.lm.config import LmConfig
from ppo_jax.lm.decoder_config import DecoderConfig
from ppo_jax.lm.models import lab_decoder_config, make_models
from ppo_jax.lm.rope import RopeParams

decode = jax.jit(decoder.decode, static_argnums=(0, 4))
logits = jax.jit(decoder.logits, static_argnums=0)

CONFIG = DecoderConfig(
    model_type="qwen3",
    vocab_size=50,
    hidden_size=32,
    intermediate_size=48,
    num_layers=2,
    num_heads=4,
    num_kv_heads=2,
    head_dim=8,
    max_position_embeddings=64,
    rope=RopeParams("llama3", 5e5, 8.0, 1.0, 4.0, 8),
    qkv_bias=True,
    qk_norm=True,
    eos_token_ids=(1,),
    pad_token_id=0,
)


def random_params(model, key):
    """Fresh parameters with every norm, bias and kernel away from its init, so each one matters."""
    params = decoder.init_params(model, key)
    leaves, tree = jax.tree.flatten(params)
    keys = jax.random.split(jax.random.key(1), len(leaves))
    return jax.tree.unflatten(
        tree, [p + 0.3 * jax.random.normal(k, p.shape) for p, k in zip(leaves, keys, strict=True)]
    )


@pytest.mark.parametrize("temperature, top_k, top_p", [(1.0, 0, 1.0), (0.7, 5, 0.9), (0.0, 0, 1.0)])
def test_sampled_log_probs_are_the_teacher_forced_ones_of_the_same_distribution(temperature, top_k, top_p):
    """The cache path's log-probs equal a fresh one-pass forward over prompt + response, under the same truncation."""
    model = decoder.Decoder(CONFIG)
    params = random_params(model, jax.random.key(0))
    prompt = jax.random.randint(jax.random.key(2), (4, 7), 2, 50)
    mask = jnp.ones_like(prompt).at[1, :3].set(0).at[3, :5].set(0)
    prompt = jnp.where(mask == 1, prompt, 0)
    knobs = sampling.sampling_params(temperature, top_k, top_p)
    out = decode(model, params, prompt, mask, 9, jax.random.key(3), knobs)
    full_tokens = jnp.concatenate([prompt, out.tokens], axis=1)
    full_mask = jnp.concatenate([mask, jnp.ones_like(out.tokens)], axis=1)
    step_logits = logits(model, params, full_tokens, full_mask)[:, prompt.shape[1] - 1 : -1]
    recomputed = sampling.token_log_prob(step_logits, out.tokens, knobs)
    alive = np.cumsum(np.isin(np.asarray(out.tokens), CONFIG.eos_token_ids), axis=1) - np.isin(
        np.asarray(out.tokens), CONFIG.eos_token_ids
    )
    alive = alive == 0  # up to and including the first EOS
    np.testing.assert_allclose(np.asarray(out.log_probs)[alive], np.asarray(recomputed)[alive], atol=2e-5)
    assert (np.asarray(out.log_probs)[~alive] == 0).all()
    assert (np.asarray(out.tokens)[~alive] == CONFIG.pad_token_id).all()


def test_greedy_picks_the_argmax_of_the_one_pass_logits():
    model = decoder.Decoder(CONFIG)
    params = random_params(model, jax.random.key(4))
    prompt = jax.random.randint(jax.random.key(5), (3, 6), 2, 50)
    mask = jnp.ones_like(prompt)
    tokens = jax.jit(decoder.greedy, static_argnums=(0, 4))(model, params, prompt, mask, 5)
    sequence = jnp.concatenate([prompt, tokens], axis=1)  # causal: the logits before step i see tokens < i only
    best = np.asarray(jnp.argmax(logits(model, params, sequence, jnp.ones_like(sequence)), axis=-1))
    for step in range(5):
        ended = np.isin(np.asarray(tokens[:, :step]), CONFIG.eos_token_ids).any(axis=1)
        np.testing.assert_array_equal(np.asarray(tokens[:, step])[~ended], best[:, 5 + step][~ended])


def test_rms_norm_against_numpy():
    x = np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32)
    w = np.random.default_rng(1).standard_normal(5).astype(np.float32)
    expected = w * x / np.sqrt((x.astype(np.float64) ** 2).mean(-1, keepdims=True) + 1e-6)
    np.testing.assert_allclose(np.asarray(decoder.rms_norm(jnp.asarray(x), jnp.asarray(w), 1e-6)), expected, rtol=1e-5)


def test_the_lab_member_reads_the_lab_sizes_and_problem():
    cfg = LmConfig(model="decoder", model_dim=32, num_layers=3, num_heads=2)
    config = lab_decoder_config(cfg)
    assert (config.hidden_size, config.num_layers, config.num_heads, config.head_dim) == (32, 3, 2, 16)
    policy, scalar = make_models(cfg)
    assert policy.out_dim == 0 and scalar.out_dim == 1
    shapes = decoder.param_shapes(policy)
    assert shapes["head"] == (32, config.vocab_size) and decoder.param_shapes(scalar)["head"] == (32, 1)
    out = jax.eval_shape(
        lambda: decoder.run(scalar, decoder.init_params(scalar, jax.random.key(0)), jnp.zeros((2, 5), jnp.int32))
    )
    assert out.shape == (2, 5, 1)
