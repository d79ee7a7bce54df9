"""The toy sequence task: copy the prompt, then stop.

Vocabulary: ``tokens.PAD``, ``tokens.EOS``, content tokens ``2 .. vocab_size - 1``. A
prompt is ``prompt_len`` content tokens drawn uniformly; the policy writes a
response of at most ``max_response_len`` tokens, one at a time, until it emits
EOS. The intended response ("what the labellers want") is the prompt followed by
EOS; the programmatic scorer (``score``) counts how
many of those ``prompt_len + 1`` positions the response gets right.

Demonstrations, for the supervised warm start and the preference pairs, come from
a noisy demonstrator: each token of the intended response (continued with EOS) is
replaced, with probability ``noise``, by a token drawn uniformly from EOS and the
content tokens. An EOS ends the response; every later position is PAD.

Shapes: prompts ``[..., P]``, responses ``[..., L]``, sequences ``[..., P + L]``
(prompt then response), int32.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ppo_jax.lm.tokens import EOS, PAD, end_at_eos

FIRST_CONTENT = 2


def sample_prompts(key: jax.Array, num: int, prompt_len: int, vocab_size: int) -> jax.Array:
    """``[num, prompt_len]`` content tokens, uniform over ``FIRST_CONTENT .. vocab_size - 1``."""
    return jax.random.randint(key, (num, prompt_len), FIRST_CONTENT, vocab_size, dtype=jnp.int32)


def target_response(prompt: jax.Array, max_response_len: int) -> jax.Array:
    """The intended response ``[..., L]``: the prompt, EOS, then PAD."""
    prompt_len = prompt.shape[-1]
    pad = jnp.full(prompt.shape[:-1] + (max_response_len - prompt_len - 1,), PAD, jnp.int32)
    eos = jnp.full(prompt.shape[:-1] + (1,), EOS, jnp.int32)
    return jnp.concatenate([prompt.astype(jnp.int32), eos, pad], axis=-1)


def demonstrate(
    key: jax.Array, prompt: jax.Array, max_response_len: int, vocab_size: int, noise: jax.typing.ArrayLike
) -> jax.Array:
    """Noisy demonstrations ``[..., L]`` for ``prompt [..., P]`` (see the module docstring).

    ``noise`` (scalar or broadcastable to ``[..., 1]``) is the probability that a
    token of the intended response is replaced by one drawn uniformly from
    ``EOS .. vocab_size - 1`` (which may draw the same token again).
    """
    prompt_len = prompt.shape[-1]
    intended = target_response(prompt, max_response_len)
    intended = jnp.where(jnp.arange(max_response_len) >= prompt_len, EOS, intended)  # EOS from position P on
    flip_key, token_key = jax.random.split(key)
    flip = jax.random.uniform(flip_key, intended.shape) < noise
    replacement = jax.random.randint(token_key, intended.shape, EOS, vocab_size, dtype=jnp.int32)
    return end_at_eos(jnp.where(flip, replacement, intended))


def score(prompt: jax.Array, response: jax.Array) -> jax.Array:
    """Share of the ``P + 1`` positions of the intended response (prompt, EOS) that ``response`` matches; ``[B]`` in [0, 1]."""
    prompt_len = prompt.shape[-1]
    target = target_response(prompt, response.shape[-1])
    return (response[..., : prompt_len + 1] == target[..., : prompt_len + 1]).mean(-1).astype(jnp.float32)
