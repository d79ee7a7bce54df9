"""Sampled pass rates of a policy: pass@1 and pass@k from n samples per prompt (Chen et al. 2021, eq. 1).

With ``c`` of ``n`` samples correct, the unbiased estimate of pass@k is
``1 - C(n - c, k) / C(n, k)``; for k = n it is 1 if any sample is correct, and
for k = 1 it is ``c / n``.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
from jax import lax

from ppo_jax.lm import problems
from ppo_jax.lm.models import generate
from ppo_jax.lm.sampling import SamplingParams


def pass_at_k(correct: jax.Array, k: int) -> jax.Array:
    """Mean over prompts of the unbiased pass@k from ``correct [num_prompts, n]`` (0/1), ``1 <= k <= n``."""
    n = correct.shape[-1]
    c = correct.sum(-1)
    # C(n - c, k) / C(n, k) = prod_{i=0}^{k-1} (n - c - i) / (n - i), 0 once n - c < k
    i = jnp.arange(k, dtype=jnp.float32)
    fail = jnp.prod(jnp.clip((n - c[:, None] - i) / (n - i), 0.0, 1.0), axis=-1)
    return (1.0 - fail).mean()


def sampled_correct(
    cfg, model: nn.Module, params, key: jax.Array, num_prompts: int, samples: int, knobs: SamplingParams
) -> jax.Array:
    """``[num_prompts, samples]`` float32: whether each of ``samples`` responses (drawn with ``knobs``) to fresh
    prompts is right."""
    prompt_key, sample_key = jax.random.split(key)
    prompt = jnp.repeat(problems.sample_prompts(cfg, prompt_key, num_prompts), samples, axis=0)
    response = generate(model, params, sample_key, prompt, problems.response_len(cfg), knobs)
    return problems.verify(cfg, prompt, response).correct.reshape(num_prompts, samples)


TRAIN_PASS_AT_K = (2, 4, 8, 16)
"""The k of the per-update pass@k over each prompt's group of responses (NaN above the group size)."""

PASS_AT_K = (1, 2, 4, 8, 16, 32, 64, 128, 256)
"""The k of the final evaluation's pass@k curve (each up to its samples per prompt; Yue et al. 2025 go to 256)."""

MAX_ROWS = 4096
"""Most responses the evaluation samples in one batch (more prompts x samples: ``lax.map`` over chunks of prompts)."""


def evaluation_correct(
    cfg, model: nn.Module, params, key: jax.Array, num_prompts: int, samples: int, knobs: SamplingParams
) -> jax.Array:
    """``[num_prompts, samples]`` as ``sampled_correct``, drawn in chunks of at most ``MAX_ROWS`` responses.

    One chunk (``num_prompts x samples <= MAX_ROWS``) is ``sampled_correct`` with ``key``
    itself; chunk i of several draws its prompts and responses with key i of
    ``jax.random.split(key, chunks)``.
    """
    per_chunk = max(1, MAX_ROWS // samples)
    if num_prompts <= per_chunk:
        return sampled_correct(cfg, model, params, key, num_prompts, samples, knobs)
    chunks = -(-num_prompts // per_chunk)
    keys = jax.random.split(key, chunks)
    correct = lax.map(lambda k: sampled_correct(cfg, model, params, k, per_chunk, samples, knobs), keys)
    return correct.reshape(-1, samples)[:num_prompts]


def pass_at_k_curve(correct: jax.Array) -> dict[int, jax.Array]:
    """``{k: pass@k}`` for each k of ``PASS_AT_K`` up to the samples per prompt of ``correct [prompts, n]``."""
    return {k: pass_at_k(correct, k) for k in PASS_AT_K if k <= correct.shape[-1]}


def sampled_pass_rates(
    cfg, model: nn.Module, params, key: jax.Array, num_prompts: int, samples: int, knobs: SamplingParams
) -> tuple[jax.Array, jax.Array]:
    """``(pass@1, pass@samples)`` of ``samples`` responses (drawn with ``knobs``) to each of ``num_prompts`` fresh
    prompts."""
    correct = sampled_correct(cfg, model, params, key, num_prompts, samples, knobs)
    return pass_at_k(correct, 1), pass_at_k(correct, samples)
