"""Checking Countdown responses in the graph: parse the steps after ANSWER, check each one's arithmetic and the
numbers it uses (TinyZero's rule, Pan et al. 2025, on ``countdown_task``'s step format).

A response is **well formed** when it ends with EOS, holds exactly one ANSWER
before it, and what follows ANSWER is exactly N - 1 steps ``x op y=z`` separated
by STEP, then EOS, each number a run of 1 to ``NUMBER_DIGITS`` digits (leading
zeros read as Python's ``int`` reads them). The scratchpad before ANSWER is free.
It is **correct** when it is well formed, every step's z equals x op y (``/``:
exact, divisor nonzero; ``-``: z >= 0, as every number written is), the operands
use each given number exactly once and each earlier result at most once (the
pool of numbers, a multiset, shrinks by the two operands and grows by the result
at each step; Python's reference in the tests), and the last result is the target.

Shapes: prompts ``[..., N + 4]``, responses ``[..., L]``; N is static.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ppo_jax.lm.countdown_task import read_prompt
from ppo_jax.lm.countdown_vocabulary import (
    ANSWER,
    DIGIT_0,
    DIVIDE,
    EOS,
    EQUALS,
    MINUS,
    PAD,
    PLUS,
    STEP,
    TIMES,
    is_digit,
)
from ppo_jax.lm.tokens import end_at_eos, response_mask

NUMBER_DIGITS = 4
"""The most digits of a number in a step: every value N <= 4 digits 1..9 reach is at most 9^4 = 6561."""
NUMBER, OPERATION, EQUAL_SIGN, SEPARATOR, END = range(5)
"""The kinds of an item (a maximal run of digits, or one other token) of the answer."""


def _answer(response: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The tokens after the first ANSWER, left-aligned ``[..., L]`` (EOS, then PAD), and whether the response ends
    with EOS and holds exactly one ANSWER before it ``[...]``."""
    length = response.shape[-1]
    ended = end_at_eos(response)
    is_marker = ended == ANSWER
    start = jnp.where(is_marker.any(-1), jnp.argmax(is_marker, -1) + 1, length)
    index = start[..., None] + jnp.arange(length)
    answer = jnp.where(index < length, jnp.take_along_axis(ended, jnp.minimum(index, length - 1), -1), PAD)
    return answer, (response == EOS).any(-1) & (is_marker.sum(-1) == 1)


def _items(answer: jax.Array, numbers: int) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Parse ``answer [..., L]`` into the 6 (N - 1) items of N - 1 steps: their values (numbers) and tokens
    (operations) ``[..., 6 (N - 1)]``, and whether the answer has exactly that form ``[...]``."""
    length = answer.shape[-1]
    body = response_mask(answer)  # up to and including EOS
    digit = is_digit(answer) & body
    before = jnp.pad(digit, [(0, 0)] * (answer.ndim - 1) + [(1, 0)])
    item_start = body & ~(digit & before[..., :-1])
    item = jnp.cumsum(item_start, -1) - 1
    kind = jnp.select(
        [digit, (answer >= PLUS) & (answer <= DIVIDE), answer == EQUALS, answer == STEP, answer == EOS],
        [NUMBER, OPERATION, EQUAL_SIGN, SEPARATOR, END],
        -1,
    )
    pattern = np.tile([NUMBER, OPERATION, NUMBER, EQUAL_SIGN, NUMBER, SEPARATOR], numbers - 1)
    pattern[-1] = END
    count = pattern.size
    expected = jnp.asarray(pattern)[jnp.clip(item, 0, count - 1)]
    # run[t]: digits in the run ending at t; value[t]: the number they write
    last_other = jax.lax.cummax(jnp.where(digit, -1, jnp.arange(length)), axis=answer.ndim - 1)
    run = jnp.arange(length) - last_other
    values = jnp.where(digit, answer - DIGIT_0, 0)
    value = sum(
        jnp.pad(values, [(0, 0)] * (answer.ndim - 1) + [(k, 0)])[..., :length] * 10**k * (run > k)
        for k in range(NUMBER_DIGITS)
    )
    formed = jnp.where(body, kind == expected, True).all(-1) & (item_start.sum(-1) == count)
    formed = formed & (run <= NUMBER_DIGITS).all(-1)
    at_item = (item[..., None] == jnp.arange(count)) & body[..., None]  # [..., L, 6 (N - 1)]
    run_end = digit & ~jnp.pad(digit, [(0, 0)] * (answer.ndim - 1) + [(0, 1)])[..., 1:]
    item_value = jnp.where(at_item & run_end[..., None], value[..., None], 0).sum(-2)
    item_token = jnp.where(at_item & item_start[..., None], answer[..., None], 0).sum(-2)
    return item_value, item_token, formed


def _arithmetic(x: jax.Array, operation: jax.Array, y: jax.Array, z: jax.Array) -> jax.Array:
    """``[...]`` bool: z = x op y over non-negative integers (division exact, by a nonzero y)."""
    return jnp.select(
        [operation == PLUS, operation == MINUS, operation == TIMES],
        [z == x + y, z == x - y, z == x * y],
        (y > 0) & (x == y * z),
    )


def verify(prompt: jax.Array, response: jax.Array, numbers: int) -> tuple[jax.Array, jax.Array]:
    """``(correct [...] float32 in {0, 1}, well_formed [...] bool)`` of ``response [..., L]`` to ``prompt``."""
    given, target = read_prompt(prompt, numbers)
    answer, marked = _answer(response)
    value, token, formed = _items(answer, numbers)
    well_formed = marked & formed
    pool = jnp.concatenate([given, jnp.zeros(given.shape[:-1] + (numbers - 1,), jnp.int32)], -1)
    free = jnp.arange(2 * numbers - 1) < numbers
    right = well_formed
    for step in range(numbers - 1):
        x, operation, y, z = (
            value[..., 6 * step],
            token[..., 6 * step + 1],
            value[..., 6 * step + 2],
            value[..., 6 * step + 4],
        )
        right = right & _arithmetic(x, operation, y, z)
        for operand in (x, y):  # take one free pool entry of this value; equal values are interchangeable
            match = free & (pool == operand[..., None])
            taken = jnp.arange(2 * numbers - 1) == jnp.argmax(match, -1)[..., None]
            right, free = right & match.any(-1), free & ~taken
        pool, free = pool.at[..., numbers + step].set(z), free.at[..., numbers + step].set(True)
    return (right & (z == target)).astype(jnp.float32), well_formed
