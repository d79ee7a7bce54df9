"""n-digit addition: a task with a verifiable reward (RLVR; Shao et al. 2024, DeepSeekMath; Guo et al. 2025, DeepSeek-R1).

**Prompt** ``[..., 2n + 2]``: operand a, PLUS, operand b, EQUALS. Each operand is
uniform in [0, 10^n) and written with exactly n digits, least significant first
(zero-padded at its most significant end): reversed digits are what small
transformers learn to add (Lee et al. 2023, "Teaching arithmetic to small
transformers").

**Answer**: a + b, least significant digit first, without zeros at its most
significant end, then EOS. Its length varies with the carry: n or n + 1 digits
when an operand has n significant digits, fewer for small operands, and ``0``
for 0 + 0.

**Scratchpad** (``scratchpad=True``): the demonstrator first writes the carry
chain c_1 .. c_n (c_i in {0, 1} the carry out of digit i - 1, least significant
first: a short chain of thought), then ANSWER, then the answer and EOS. Only the
answer after ANSWER is checked (``verifier.extract_answer``), so under RL the
scratchpad, and the response length, are free to change.

Example (n = 2, 95 + 07 = 102): prompt ``59+70=``, answer ``201.``, with
scratchpad ``11|201.`` (symbols of ``vocabulary.decode``).

Sizes (``digits`` n, lengths) are static Python ints; ``noise`` may be traced.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from ppo_jax.errors import ConfigError
from ppo_jax.lm.vocabulary import (
    EOS,
    EQUALS,
    PAD,
    PLUS,
    digit_tokens,
    digit_values,
    written_demonstration,
)


def min_response_len(digits: int, scratchpad: bool) -> int:
    """The longest demonstration: n + 1 answer digits and EOS, plus n carries and ANSWER with the scratchpad."""
    return digits + 2 + (digits + 1 if scratchpad else 0)


def sample_prompts(key: jax.Array, num: int, digits: int) -> jax.Array:
    """``[num, 2n + 2]`` prompts with operands uniform in [0, 10^n) (each digit uniform)."""
    operand = digit_tokens(jax.random.randint(key, (2, num, digits), 0, 10))
    plus = jnp.full((num, 1), PLUS, jnp.int32)
    equals = jnp.full((num, 1), EQUALS, jnp.int32)
    return jnp.concatenate([operand[0], plus, operand[1], equals], axis=-1)


def _operand_digits(prompt: jax.Array, digits: int) -> tuple[jax.Array, jax.Array]:
    """The digit values ``[..., n]`` of a and b, least significant first."""
    if prompt.shape[-1] != 2 * digits + 2:
        raise ConfigError(f"an addition prompt of {digits} digits has {2 * digits + 2} tokens, got {prompt.shape[-1]}.")
    return digit_values(prompt[..., :digits]), digit_values(prompt[..., digits + 1 : 2 * digits + 1])


def operands(prompt: jax.Array, digits: int) -> tuple[jax.Array, jax.Array]:
    """``(a, b)``, each ``[...]`` int32, read from ``prompt [..., 2n + 2]``; n <= 9 (int32)."""
    if digits > 9:
        raise ConfigError(f"operands of {digits} digits overflow int32; read at most 9.")
    place = 10 ** jnp.arange(digits, dtype=jnp.int32)
    a, b = _operand_digits(prompt, digits)
    return (a * place).sum(-1), (b * place).sum(-1)


def _column_sums(prompt: jax.Array, digits: int) -> tuple[jax.Array, jax.Array]:
    """Schoolbook addition: the digits of a + b ``[..., n + 1]`` and the carries c_1 .. c_n ``[..., n]``."""
    a, b = _operand_digits(prompt, digits)

    def column(carry, ab):
        total = ab[0] + ab[1] + carry
        return total // 10, (total % 10, total // 10)

    no_carry = jnp.zeros(a.shape[:-1], jnp.int32)
    final_carry, (sum_digits, carry_out) = lax.scan(column, no_carry, (jnp.moveaxis(a, -1, 0), jnp.moveaxis(b, -1, 0)))
    sum_digits = jnp.concatenate([jnp.moveaxis(sum_digits, 0, -1), final_carry[..., None]], axis=-1)
    return sum_digits, jnp.moveaxis(carry_out, 0, -1)


def carries(prompt: jax.Array, digits: int) -> jax.Array:
    """The carry chain ``[..., n]`` int32 in {0, 1}: c_i is the carry out of digit i - 1 (least significant first)."""
    return _column_sums(prompt, digits)[1]


def answer_tokens(prompt: jax.Array, digits: int, max_len: int) -> jax.Array:
    """The target ``[..., max_len]``: a + b least significant digit first (no zeros at its top end), EOS, PAD."""
    if max_len < digits + 2:
        raise ConfigError(f"max_len must hold n + 1 digits and EOS: at least {digits + 2}, got {max_len}.")
    sum_digits, _ = _column_sums(prompt, digits)
    position = jnp.arange(max_len)
    significant = jnp.where(sum_digits != 0, position[: digits + 1] + 1, 0).max(-1)
    length = jnp.maximum(significant, 1)[..., None]  # "0" for a zero sum
    padding = [(0, 0)] * (sum_digits.ndim - 1) + [(0, max_len - digits - 1)]
    written = digit_tokens(jnp.pad(sum_digits, padding))
    return jnp.where(position < length, written, jnp.where(position == length, EOS, PAD))


def demonstrate(
    key: jax.Array,
    prompt: jax.Array,
    digits: int,
    max_response_len: int,
    *,
    scratchpad: bool,
    noise: jax.typing.ArrayLike,
) -> jax.Array:
    """Demonstrations ``[..., L]`` for ``prompt [..., 2n + 2]``: [carries, ANSWER,] answer, EOS, then PAD.

    ``noise`` (scalar or broadcastable to ``[..., 1]``): the probability that a token
    is replaced by a uniform one (``vocabulary.add_token_noise``); 0 gives clean ones.
    """
    thought = carries(prompt, digits) if scratchpad else None
    return written_demonstration(
        key,
        prompt,
        thought,
        lambda room: answer_tokens(prompt, digits, room),
        max_response_len,
        noise,
        longest=min_response_len(digits, scratchpad),
    )
