"""The causal Transformer: sampling agrees with scoring, the cache changes nothing, and a NumPy reference."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ppo_jax.lm import copy_task, tokens
from ppo_jax.lm.transformer import Decoder, generate, generate_with_outputs, init_params, run

VOCAB, BATCH, PROMPT_LEN, RESPONSE_LEN = 12, 4, 5, 6
POLICY = Decoder(
    vocab_size=VOCAB,
    max_len=PROMPT_LEN + RESPONSE_LEN,
    model_dim=32,
    num_layers=2,
    num_heads=4,
    out_dim=VOCAB,
    head_gain=1.0,  # logits of order 1, so log-probs are a real test
)

init_jit = jax.jit(lambda key: init_params(POLICY, key))
run_jit = jax.jit(lambda params, tokens: run(POLICY, params, tokens))
generate_jit = jax.jit(
    lambda params, key, prompt, use_cache: generate_with_outputs(
        POLICY, params, key, prompt, RESPONSE_LEN, use_cache=use_cache
    ),
    static_argnums=3,
)


def setup(seed: int):
    params_key, prompt_key, sample_key = jax.random.split(jax.random.key(seed), 3)
    prompt = copy_task.sample_prompts(prompt_key, BATCH, PROMPT_LEN, VOCAB)
    return init_jit(params_key), prompt, sample_key


def test_sampling_log_probs_equal_teacher_forced_log_probs():
    params, prompt, key = setup(0)
    response, sampled_outputs = generate_jit(params, key, prompt, True)
    scored_outputs = run_jit(params, tokens.join(prompt, response)[:, :-1])[:, PROMPT_LEN - 1 :]

    def log_probs(outputs):
        return jnp.take_along_axis(jax.nn.log_softmax(outputs), response[..., None], axis=-1)[..., 0]

    mask = tokens.response_mask(response)
    assert not mask.all(), "this seed should end some response early, so that PAD positions are exercised"
    np.testing.assert_allclose(
        np.where(mask, log_probs(sampled_outputs), 0.0), np.where(mask, log_probs(scored_outputs), 0.0), atol=1e-5
    )


def test_uncached_generation_draws_the_same_tokens():
    params, prompt, key = setup(1)
    cached = generate_jit(params, key, prompt, True).response
    uncached = generate_jit(params, key, prompt, False).response
    np.testing.assert_array_equal(cached, uncached)


def test_outputs_depend_only_on_earlier_tokens():
    params, tokens, _ = setup(2)
    changed_at = 2
    changed = tokens.at[:, changed_at].set((tokens[:, changed_at] + 1) % VOCAB)
    before, after = run_jit(params, tokens), run_jit(params, changed)
    np.testing.assert_array_equal(before[:, :changed_at], after[:, :changed_at])
    assert (before[:, changed_at:] != after[:, changed_at:]).any()


def layer_norm(x, p, epsilon=1e-6):  # flax.linen.LayerNorm's default epsilon
    return (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + epsilon) * p["scale"] + p["bias"]


def gelu(x):  # tanh approximation, flax.linen.gelu's default (Hendrycks & Gimpel 2016)
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)))


def dense(x, p):
    return x @ p["kernel"] + p["bias"]


def reference_forward(params, tokens):
    """Pre-LN Transformer, ``tokens [B, T]`` -> outputs ``[B, T, out_dim]``, in float64 NumPy."""
    p = jax.tree.map(lambda leaf: np.asarray(leaf, np.float64), params["params"])
    length = tokens.shape[1]
    x = p["token_embed"]["embedding"][tokens] + p["position_embed"]["embedding"][:length]
    causal = np.tril(np.ones((length, length), bool))  # [query, key]
    for layer in range(POLICY.num_layers):
        block = p[f"block_{layer}"]
        h = layer_norm(x, block["attention_norm"])
        q, k, v = (
            np.einsum("btd,dhe->bthe", h, block[n]["kernel"]) + block[n]["bias"] for n in ("query", "key", "value")
        )
        scores = np.einsum("bthe,bshe->bhts", q, k) / np.sqrt(q.shape[-1])
        scores = np.where(causal, scores, -np.inf)
        weights = np.exp(scores - scores.max(-1, keepdims=True))
        weights /= weights.sum(-1, keepdims=True)
        attended = np.einsum("bhts,bshe->bthe", weights, v)
        x = x + np.einsum("bthe,hed->btd", attended, block["attention_out"]["kernel"]) + block["attention_out"]["bias"]
        x = x + dense(gelu(dense(layer_norm(x, block["mlp_norm"]), block["mlp_hidden"])), block["mlp_out"])
    return dense(layer_norm(x, p["final_norm"]), p["head"])


def test_run_matches_numpy_reference():
    params, _, key = setup(3)
    tokens = jax.random.randint(key, (BATCH, POLICY.max_len), 0, VOCAB)
    np.testing.assert_allclose(run_jit(params, tokens), reference_forward(params, np.asarray(tokens)), atol=1e-5)


def test_vmapped_generation_equals_separate_runs():
    params_keys = jax.random.split(jax.random.key(4), 2)
    sample_keys = jax.random.split(jax.random.key(5), 2)
    prompt = copy_task.sample_prompts(jax.random.key(6), BATCH, PROMPT_LEN, VOCAB)
    separate_params = [init_jit(key) for key in params_keys]
    params = jax.tree.map(lambda *leaves: jnp.stack(leaves), *separate_params)
    together = jax.jit(jax.vmap(lambda params, key: generate(POLICY, params, key, prompt, RESPONSE_LEN)))(
        params, sample_keys
    )
    for i in range(2):
        alone = generate_jit(separate_params[i], sample_keys[i], prompt, True).response
        np.testing.assert_array_equal(together[i], alone)
