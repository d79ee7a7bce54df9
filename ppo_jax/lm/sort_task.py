"""Sorting a short list of digits: a task with a verifiable reward (RLVR, as ``addition_task``).

**Prompt** ``[..., k + 1]``: k digits, each uniform in 0..9 (repeats allowed),
then EQUALS. **Answer**: the k digits in ascending order, then EOS.

**Scratchpad** (``scratchpad=True``): the demonstrator first writes the histogram,
the count of each digit 0 .. 9 as ten digits (so k <= 9), then ANSWER, then the
answer and EOS: counting sort as a chain of thought, where the answer is d
repeated count_d times for d = 0 .. 9. Only the answer after ANSWER is checked
(``verifier.extract_answer``).

Example (k = 4): prompt ``3103=``, answer ``0133.``, with scratchpad
``1102000000|0133.`` (symbols of ``vocabulary.decode``).

The size ``digits`` (k, the number of digits to sort) and lengths are static
Python ints; ``noise`` may be traced. Signatures match ``addition_task``'s.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ppo_jax.errors import ConfigError
from ppo_jax.lm.vocabulary import EOS, EQUALS, PAD, digit_tokens, digit_values, written_demonstration

HISTOGRAM_LEN = 10  # one count per digit value


def min_response_len(digits: int, scratchpad: bool) -> int:
    """The longest demonstration: k digits and EOS, plus the ten counts and ANSWER with the scratchpad."""
    return digits + 1 + (HISTOGRAM_LEN + 1 if scratchpad else 0)


def sample_prompts(key: jax.Array, num: int, digits: int) -> jax.Array:
    """``[num, k + 1]``: k digits uniform in 0..9, then EQUALS."""
    listed = digit_tokens(jax.random.randint(key, (num, digits), 0, 10))
    return jnp.concatenate([listed, jnp.full((num, 1), EQUALS, jnp.int32)], axis=-1)


def _listed(prompt: jax.Array, digits: int) -> jax.Array:
    """The digit values ``[..., k]`` of ``prompt [..., k + 1]``."""
    if prompt.shape[-1] != digits + 1:
        raise ConfigError(f"a sorting prompt of {digits} digits has {digits + 1} tokens, got {prompt.shape[-1]}.")
    return digit_values(prompt[..., :digits])


def histogram(prompt: jax.Array, digits: int) -> jax.Array:
    """``[..., 10]`` int32: how many times each digit 0 .. 9 appears in the prompt."""
    return (_listed(prompt, digits)[..., None] == jnp.arange(HISTOGRAM_LEN)).sum(-2).astype(jnp.int32)


def answer_tokens(prompt: jax.Array, digits: int, max_len: int) -> jax.Array:
    """The target ``[..., max_len]``: the k digits in ascending order, EOS, then PAD."""
    if max_len < digits + 1:
        raise ConfigError(f"max_len must hold {digits} digits and EOS: at least {digits + 1}, got {max_len}.")
    ordered = digit_tokens(jnp.sort(_listed(prompt, digits), axis=-1))
    eos = jnp.full(prompt.shape[:-1] + (1,), EOS, jnp.int32)
    pad = jnp.full(prompt.shape[:-1] + (max_len - digits - 1,), PAD, jnp.int32)
    return jnp.concatenate([ordered, eos, pad], axis=-1)


def demonstrate(
    key: jax.Array,
    prompt: jax.Array,
    digits: int,
    max_response_len: int,
    *,
    scratchpad: bool,
    noise: jax.typing.ArrayLike,
) -> jax.Array:
    """Demonstrations ``[..., L]`` for ``prompt [..., k + 1]``: [histogram, ANSWER,] sorted digits, EOS, then PAD.

    ``noise`` (scalar or broadcastable to ``[..., 1]``): the probability that a token
    is replaced by a uniform one (``vocabulary.add_token_noise``); 0 gives clean ones.
    """
    if scratchpad:
        if digits > 9:
            raise ConfigError(
                f"the histogram scratchpad writes counts as single digits: at most 9 digits, got {digits}."
            )
    thought = histogram(prompt, digits) if scratchpad else None
    return written_demonstration(
        key,
        prompt,
        thought,
        lambda room: answer_tokens(prompt, digits, room),
        max_response_len,
        noise,
        longest=min_response_len(digits, scratchpad),
    )
