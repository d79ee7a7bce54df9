"""A rollout's per-token scores in row chunks: the rows a plain loop computes one at a time, and less memory."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from ppo_jax.lm import problems
from ppo_jax.lm.config import LmConfig
from ppo_jax.lm.models import init_params, make_models
from ppo_jax.lm.token_scores import in_row_chunks, score_tokens, scoring_chunks

CFG = LmConfig(
    model="decoder", digits=1, model_dim=16, num_layers=1, num_heads=2, num_prompts=4, group_size=4,
    num_minibatches=2, advantage="gae", sft_steps=0, eval_prompts=0,
)  # fmt: skip


def test_in_row_chunks_is_a_row_by_row_loop():
    rows = np.random.default_rng(0).normal(size=(12, 3, 5)).astype(np.float32)
    fn = lambda x: (x.sum(-1), jnp.cumsum(x, axis=1))  # noqa: E731 - any function of rows
    for chunks in (1, 2, 3, 6, 12):
        total, cumulative = in_row_chunks(fn, (jnp.asarray(rows),), chunks)
        np.testing.assert_allclose(np.asarray(total), [r.sum(-1) for r in rows], rtol=1e-6)
        np.testing.assert_allclose(np.asarray(cumulative), [np.cumsum(r, axis=0) for r in rows], rtol=1e-6)


def _inputs(cfg):
    models = make_models(cfg)
    keys = jax.random.split(jax.random.key(0), 3)
    params = {"actor": init_params(models.policy, keys[0]), "critic": init_params(models.scalar, keys[1])}
    reference = init_params(models.policy, keys[2])
    n, prompt, length = cfg.num_sequences, problems.prompt_len(cfg), problems.response_len(cfg)
    sequence = jax.random.randint(jax.random.key(1), (n, prompt + length), 2, problems.vocab_size(cfg))
    return models, params, reference, sequence[:, :-1], sequence[:, prompt:], prompt - 1


def test_chunked_scores_equal_one_pass_and_take_less_memory():
    chunked = dataclasses.replace(CFG, micro_batches=2)
    assert scoring_chunks(CFG) == 1 and scoring_chunks(chunked) == 4  # 2 minibatches x 2 micro-batches
    models, params, reference, inputs, response, start = _inputs(CFG)
    whole = score_tokens(CFG, models, params, reference, inputs, response, start)
    parts = score_tokens(chunked, models, params, reference, inputs, response, start)
    for a, b in zip(whole, parts, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)
    assert np.abs(np.asarray(whole.values)).max() > 0  # the critic's values are scored too

    def temporaries(cfg):
        fn = jax.jit(lambda p, r, i, o: score_tokens(cfg, models, p, r, i, o, start))
        return fn.lower(params, reference, inputs, response).compile().memory_analysis().temp_size_in_bytes

    assert temporaries(chunked) < 0.6 * temporaries(CFG)
