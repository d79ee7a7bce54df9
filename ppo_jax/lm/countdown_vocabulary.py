"""The vocabulary of the Countdown problem (``countdown_task``), writing numbers in it, and demonstrator noise.

A token's id is its position in ``SYMBOLS``::

    symbol  _    .    0 .. 9   +     -      *      /       =       ;     ,        |
    id      0    1    2 .. 11  12    13     14     15      16      17    18       19
    name    PAD  EOS  digits   PLUS  MINUS  TIMES  DIVIDE  EQUALS  STEP  ATTEMPT  ANSWER

PAD and EOS are ``tokens``'s, so its masks apply unchanged. STEP separates the
steps of a solution, ATTEMPT closes a failed attempt in the scratchpad, and
ANSWER ends the free scratchpad: only what follows it is checked (as
``vocabulary``'s ANSWER; Guo et al. 2025, sec. 2.2.2). This is not the
arithmetic tasks' 15-token ``vocabulary``, whose size shapes their models.

Numbers are written most significant digit first, without leading zeros, in a
fixed number of slots (``number_slots``): the empty slots are ``HOLE`` (not a
token), squeezed out by ``squeeze``, so variable-length text has static shapes.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ppo_jax.lm import tokens
from ppo_jax.lm.tokens import EOS, PAD

SYMBOLS = "_.0123456789+-*/=;,|"
DIGIT_0 = 2
PLUS, MINUS, TIMES, DIVIDE = 12, 13, 14, 15
"""The operations; operation k in 0..3 (``countdown_task``'s index) is token PLUS + k."""
EQUALS = 16
STEP = 17
ATTEMPT = 18
ANSWER = 19
VOCAB_SIZE = len(SYMBOLS)
HOLE = -1
"""An empty slot of written text (never a token): ``squeeze`` removes it."""


def digit_tokens(values: jax.Array) -> jax.Array:
    """Digit values 0..9 ``[...]`` -> their tokens ``[...]`` int32."""
    return values.astype(jnp.int32) + DIGIT_0


def is_digit(token: jax.Array) -> jax.Array:
    """``[...]`` bool: True on the digit tokens."""
    return (token >= DIGIT_0) & (token < DIGIT_0 + 10)


def number_slots(values: jax.Array, width: int) -> jax.Array:
    """``values [...]`` in 0 .. 10^width - 1 -> ``[..., width]``: its digits, most significant first, HOLE for
    leading zeros (0 is written ``0``)."""
    place = 10 ** jnp.arange(width - 1, -1, -1, dtype=jnp.int32)
    values = values.astype(jnp.int32)[..., None]
    written = (values >= place) | (place == 1)
    return jnp.where(written, digit_tokens(values // place % 10), HOLE)


def squeeze(written: jax.Array, length: int) -> jax.Array:
    """``[..., W]`` tokens and HOLEs -> ``[..., length]``: the tokens in order, PAD after (cut at ``length``)."""
    order = jnp.argsort(written == HOLE, axis=-1, stable=True)
    squeezed = jnp.take_along_axis(written, order, axis=-1)
    width = written.shape[-1]
    padding = [(0, 0)] * (written.ndim - 1) + [(0, max(length - width, 0))]
    return jnp.pad(jnp.where(squeezed == HOLE, PAD, squeezed), padding)[..., :length]


def add_token_noise(key: jax.Array, clean: jax.Array, noise: jax.typing.ArrayLike) -> jax.Array:
    """Noisy demonstrations ``[..., L]`` from clean ones ``[..., L]`` (EOS-terminated, PAD after), as
    ``vocabulary.add_token_noise`` over this vocabulary: each token of the clean response continued with EOS is
    replaced with probability ``noise`` (broadcastable to ``[..., 1]``) by a uniform non-PAD token; the first EOS
    ends the response."""
    intended = jnp.where(clean == PAD, EOS, clean)
    flip_key, token_key = jax.random.split(key)
    flip = jax.random.uniform(flip_key, intended.shape) < noise
    replacement = jax.random.randint(token_key, intended.shape, EOS, VOCAB_SIZE, dtype=jnp.int32)
    return tokens.end_at_eos(jnp.where(flip, replacement, intended))


def encode(text: str) -> np.ndarray:
    """``"7532=016"`` -> int32 tokens ``[len(text)]`` (one symbol of ``SYMBOLS`` per token)."""
    return np.array([SYMBOLS.index(symbol) for symbol in text], np.int32)


def decode(token_ids) -> str:
    """Tokens ``[N]`` -> text, one symbol per token (PAD is ``_``, EOS ``.``, ANSWER ``|``)."""
    return "".join(SYMBOLS[int(token)] for token in np.asarray(token_ids).reshape(-1))
