"""The decoder's memory switches: remat keeps the gradients and lowers the compiled backward pass's temporaries;
bfloat16 compute moves the logits only within bfloat16's rounding and keeps float32 master weights."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from ppo_jax.lm import decoder
from ppo_jax.lm.config import LmConfig
from ppo_jax.lm.decoder_config import DecoderConfig
from ppo_jax.lm.models import make_models
from ppo_jax.lm.rope import RopeParams
from ppo_jax.optimizer import create_train_state

CONFIG = DecoderConfig(
    model_type="qwen2",
    vocab_size=64,
    hidden_size=32,
    intermediate_size=64,
    num_layers=6,
    num_heads=4,
    num_kv_heads=2,
    head_dim=8,
    max_position_embeddings=128,
    rope=RopeParams("default", 10000.0),
    qkv_bias=True,
    eos_token_ids=(1,),
    pad_token_id=0,
)
TOKENS = jax.random.randint(jax.random.key(1), (4, 96), 2, CONFIG.vocab_size)
WEIGHTS = jax.random.normal(jax.random.key(2), (4, 96, CONFIG.vocab_size))


def loss(model, params, tokens):
    """A scalar of every logit: a fixed random projection, so every parameter gets a gradient."""
    return jnp.sum(decoder.run(model, params, tokens) * WEIGHTS[: tokens.shape[0], : tokens.shape[1]])


def test_remat_keeps_the_gradients():
    plain, remat = decoder.Decoder(CONFIG), decoder.Decoder(CONFIG, remat=True)
    params = decoder.init_params(plain, jax.random.key(0))
    grads = jax.jit(jax.grad(lambda p: loss(plain, p, TOKENS)))(params)
    recomputed = jax.jit(jax.grad(lambda p: loss(remat, p, TOKENS)))(params)
    for (path, g), r in zip(jax.tree_util.tree_leaves_with_path(grads), jax.tree.leaves(recomputed), strict=True):
        scale = float(jnp.abs(g).max())
        assert scale > 0, path
        # the same float32 operations recomputed; XLA may fuse them differently: 1e-5 of the largest entry
        np.testing.assert_allclose(np.asarray(r), np.asarray(g), rtol=0, atol=1e-5 * scale, err_msg=str(path))


def test_remat_lowers_the_backward_passes_temporaries():
    def temporaries(model):
        params = jax.eval_shape(lambda: decoder.init_params(model, jax.random.key(0)))
        compiled = jax.jit(jax.grad(lambda p, t: loss(model, p, t))).lower(params, TOKENS).compile()
        return compiled.memory_analysis().temp_size_in_bytes

    plain, remat = temporaries(decoder.Decoder(CONFIG)), temporaries(decoder.Decoder(CONFIG, remat=True))
    # 6 layers: without remat every layer's activations stay for the backward pass, with it only their inputs
    assert remat < 0.7 * plain, (plain, remat)


def test_bfloat16_compute_moves_the_logits_within_its_rounding():
    full = decoder.Decoder(CONFIG)
    half = decoder.Decoder(dataclasses.replace(CONFIG, compute_dtype="bfloat16"))
    params = decoder.init_params(full, jax.random.key(0))
    assert all(x.dtype == jnp.float32 for x in jax.tree.leaves(params))  # the master weights
    reference = np.asarray(jax.jit(decoder.run, static_argnums=0)(full, params, TOKENS))
    got = jax.jit(decoder.run, static_argnums=0)(half, params, TOKENS)
    assert got.dtype == jnp.float32  # logits stay float32
    error = np.abs(np.asarray(got) - reference).max()
    # bfloat16 keeps 8 significant bits (relative rounding 2^-8 ~ 0.004) in each of 6 layers' matmuls and
    # residual adds: a few per cent of the logits' scale, and not zero (it did compute in bfloat16)
    assert 0 < error < 0.05 * np.abs(reference).max(), (error, np.abs(reference).max())


def test_mixed_precision_trains_float32_master_weights():
    cfg = LmConfig(model="decoder", digits=1, model_dim=16, num_layers=1, num_heads=2, compute_dtype="bfloat16")
    policy = make_models(cfg).policy
    assert policy.config.param_dtype == "float32" and policy.config.compute_dtype == "bfloat16"
    params = decoder.init_params(policy, jax.random.key(0))
    state = create_train_state(policy.apply, params, cfg)
    tokens = TOKENS[:, :8] % policy.config.vocab_size
    grads = jax.jit(jax.grad(lambda p: jnp.sum(decoder.run(policy, p, tokens)[..., 0] ** 2)))(params)
    assert all(g.dtype == jnp.float32 for g in jax.tree.leaves(grads))
    new = jax.jit(lambda s, g: s.apply_gradients(grads=g))(state, grads)
    assert all(p.dtype == jnp.float32 for p in jax.tree.leaves(new.params))  # the optimizer updates float32
    moved = max(
        float(jnp.abs(a - b).max()) for a, b in zip(jax.tree.leaves(new.params), jax.tree.leaves(params), strict=True)
    )
    assert moved > 0
    assert all(m.dtype == jnp.float32 for m in jax.tree.leaves(new.opt_state) if m.ndim)  # Adam's moments
