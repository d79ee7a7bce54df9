"""The fixed vocabulary of the arithmetic tasks (``addition_task``, ``sort_task``), and demonstrator noise.

A token's id is its position in ``SYMBOLS``::

    symbol  _    .    0 .. 9       +     =       |
    id      0    1    2 .. 11      12    13      14
    name    PAD  EOS  digits       PLUS  EQUALS  ANSWER

PAD and EOS are ``copy_task``'s, so its masks (``response_mask``, ``end_at_eos``,
``response_length``) apply unchanged. ANSWER ends a free scratchpad: only what
follows it is checked, as DeepSeek-R1 checks only what follows its reasoning
(Guo et al. 2025, sec. 2.2.2).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ppo_jax.errors import ConfigError
from ppo_jax.lm import tokens
from ppo_jax.lm.tokens import EOS, PAD

SYMBOLS = "_.0123456789+=|"
DIGIT_0 = 2
PLUS = 12
EQUALS = 13
ANSWER = 14
VOCAB_SIZE = len(SYMBOLS)


def digit_tokens(values: jax.Array) -> jax.Array:
    """Digit values 0..9 ``[...]`` -> their tokens ``[...]`` int32."""
    return values.astype(jnp.int32) + DIGIT_0


def digit_values(tokens: jax.Array) -> jax.Array:
    """Digit tokens ``[...]`` -> their values 0..9 ``[...]`` int32 (meaningless for other tokens)."""
    return tokens.astype(jnp.int32) - DIGIT_0


def is_digit(tokens: jax.Array) -> jax.Array:
    """``[...]`` bool: True on the digit tokens."""
    return (tokens >= DIGIT_0) & (tokens < DIGIT_0 + 10)


def add_token_noise(key: jax.Array, clean: jax.Array, noise: jax.typing.ArrayLike) -> jax.Array:
    """Noisy demonstrations ``[..., L]`` from clean ones ``clean [..., L]`` (EOS-terminated, PAD after).

    As ``copy_task.demonstrate``: the clean response is continued with EOS, each
    token is replaced with probability ``noise`` (scalar or broadcastable to
    ``[..., 1]``) by one drawn uniformly from the vocabulary except PAD, and the
    first EOS ends the response (PAD after it).
    """
    intended = jnp.where(clean == PAD, EOS, clean)
    flip_key, token_key = jax.random.split(key)
    flip = jax.random.uniform(flip_key, intended.shape) < noise
    replacement = jax.random.randint(token_key, intended.shape, EOS, VOCAB_SIZE, dtype=jnp.int32)
    return tokens.end_at_eos(jnp.where(flip, replacement, intended))


def written_demonstration(
    key: jax.Array,
    prompt: jax.Array,
    thought: jax.Array | None,
    answer_tokens,
    max_response_len: int,
    noise: jax.typing.ArrayLike,
    *,
    longest: int,
) -> jax.Array:
    """A demonstration ``[..., L]`` for ``prompt [..., P]``: [``thought``, ANSWER,] answer, EOS, PAD; then noise.

    ``thought`` ``[..., S]`` holds the scratchpad's digit values (None: no
    scratchpad); ``answer_tokens(room)`` gives the EOS-terminated answer
    ``[..., room]`` in the room left after it; ``noise`` as in ``add_token_noise``;
    ``longest``: the task's longest demonstration (ConfigError if L is shorter).
    """
    if max_response_len < longest:
        raise ConfigError(
            f"max_response_len must hold the longest demonstration: at least {longest}, got {max_response_len}."
        )
    if thought is None:
        written = jnp.zeros(prompt.shape[:-1] + (0,), jnp.int32)
    else:
        marker = jnp.full(prompt.shape[:-1] + (1,), ANSWER, jnp.int32)
        written = jnp.concatenate([digit_tokens(thought), marker], axis=-1)
    answer = answer_tokens(max_response_len - written.shape[-1])
    return add_token_noise(key, jnp.concatenate([written, answer], axis=-1), noise)


def encode(text: str) -> np.ndarray:
    """``"59+70="`` -> int32 tokens ``[len(text)]`` (one symbol of ``SYMBOLS`` per token)."""
    return np.array([SYMBOLS.index(symbol) for symbol in text], np.int32)


def decode(tokens) -> str:
    """Tokens ``[N]`` -> text, one symbol per token (PAD is ``_``, EOS ``.``, ANSWER ``|``)."""
    return "".join(SYMBOLS[int(token)] for token in np.asarray(tokens).reshape(-1))
