"""What a rollout computes per response token from its sampled batch, in row chunks so memory does not grow with it.

Teacher-forced passes over the sampled sequences give, per response token: the actor's and the reference's
log-probabilities of the sampling distribution (``sampling.token_log_prob``), the actor's entropy of it, the exact
KL between the tempered actor and reference (before top-k / top-p, where truncated distributions can be infinitely
apart), and the critic's value. Each pass materialises ``[rows, T, V]`` float32 logits (with a real vocabulary of
150k tokens, 0.6 MB per token and row), so with ``micro_batches > 1`` the passes take ``minibatch_size /
micro_batches`` rows at a time (``lax.map`` over chunks: the rows the loss's passes take), else the whole batch in
one pass.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from ppo_jax import distributions
from ppo_jax.lm import sampling
from ppo_jax.lm.models import Models, run


class TokenScores(NamedTuple):
    """Each ``[B, L]`` float32, L the response length (values 0 without a critic)."""

    log_prob: jax.Array
    ref_log_prob: jax.Array
    entropy: jax.Array
    exact_kl: jax.Array
    values: jax.Array


def scoring_chunks(cfg) -> int:
    """Row chunks of a rollout's scoring passes: ``num_minibatches * micro_batches`` with micro-batches, else 1."""
    return cfg.num_minibatches * cfg.micro_batches if cfg.micro_batches > 1 else 1


def in_row_chunks(fn: Callable, args: tuple, chunks: int):
    """``fn(*args)`` for ``args`` with a leading row axis ``[N, ...]``, computed ``N / chunks`` rows at a time."""
    if chunks == 1:
        return fn(*args)
    split = jax.tree.map(lambda x: x.reshape((chunks, x.shape[0] // chunks) + x.shape[1:]), args)
    out = lax.map(lambda chunk: fn(*chunk), split)
    return jax.tree.map(lambda x: x.reshape((x.shape[0] * x.shape[1],) + x.shape[2:]), out)


def score_tokens(
    cfg, models: Models, params: dict, reference: dict, inputs: jax.Array, response: jax.Array, start: int
) -> TokenScores:
    """Scores of ``response [B, L]`` given ``inputs [B, T]`` (the sequence but its last token; response token t is
    predicted at input position ``start + t``), by ``params["actor"]`` (and ``["critic"]``) and ``reference``."""
    knobs = cfg.rollout_sampling

    def score(inputs, response):
        logits = run(models.policy, params["actor"], inputs)[:, start:]
        ref_logits = run(models.policy, reference, inputs)[:, start:]
        tempered = [distributions.PolicyDist(sampling.tempered(x, knobs), None) for x in (logits, ref_logits)]
        if cfg.uses_critic:
            values = run(models.scalar, params["critic"], inputs)[:, start:, 0]
        else:
            values = jnp.zeros(response.shape, jnp.float32)
        return TokenScores(
            sampling.token_log_prob(logits, response, knobs),
            sampling.token_log_prob(ref_logits, response, knobs),
            sampling.entropy(logits, knobs),
            distributions.kl_divergence(*tempered),
            values,
        )

    return in_row_chunks(score, (inputs, response), scoring_chunks(cfg))
