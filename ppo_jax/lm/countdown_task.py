"""Countdown: reach a target from N given numbers with + - * /, each number used once (RLVR with many right answers).

The task of TinyZero's reasoning run (Pan et al. 2025, "TinyZero") and of "Stream
of Search" (Gandhi et al. 2024), made small enough for a tiny decoder with a
character vocabulary (``countdown_vocabulary``): the given numbers are digits
1..9, N = 3 or 4.

**Prompt** ``[..., N + 4]``: the N digits, EQUALS, the target with three digits
(zero-padded, most significant first).

**Solution**: N - 1 steps ``x op y=z`` separated by STEP (``;``). A step's
operands are given numbers or earlier steps' results, each used exactly once;
z = x op y with every value a non-negative integer (division only when exact);
the last step's result is the target. Step sequences are the expression trees
that use every number once. The verifier is ``countdown_verifier``.

**Demonstration**: k ~ U{0..K} failed attempts (K = ``attempts``), each N - 1
valid steps whose result is not the target, closed by ATTEMPT (``,``); ANSWER
(``|``); a solution; EOS. A search trace that ends in the answer, as the
demonstrations of Stream of Search; only what follows ANSWER is checked.

Example (N = 4): prompt ``7532=016``; a demonstration with one failed attempt
``7+5=12;12*3=36;36/2=18,|7*5=35;35-3=32;32/2=16.``

Prompts and demonstrations come from every step sequence of the given numbers
(``all_step_sequences``: 1152 for N = 4, 48 for N = 3), each computed with its
larger operand first and every value at most ``MOST``: a prompt's target is the
result of a uniformly drawn valid sequence (so it is solvable), a demonstration's
solution is drawn uniformly among the sequences that reach the target, its
failed attempts among those that do not.

Sizes (N, K, lengths) are static Python ints; ``noise`` may be traced.
"""

from __future__ import annotations

import functools
import itertools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ppo_jax.errors import ConfigError
from ppo_jax.lm.countdown_vocabulary import (
    ANSWER,
    ATTEMPT,
    DIGIT_0,
    EOS,
    EQUALS,
    HOLE,
    PLUS,
    STEP,
    add_token_noise,
    digit_tokens,
    number_slots,
    squeeze,
)

NUMBERS = (3, 4)
"""The N this task supports: the step sequences to enumerate grow as N! (N - 1)! 4^(N - 1) / 2^(N - 1)."""
MOST = 999
"""The largest value of a prompt's or a demonstration's steps: targets have at most three digits."""
TARGET_DIGITS = len(str(MOST))
ADD, SUBTRACT, MULTIPLY, DIVIDE = range(4)


def check(numbers: int, attempts: int) -> None:
    """ConfigError for an N outside ``NUMBERS`` or a negative count of failed attempts."""
    if numbers not in NUMBERS:
        raise ConfigError(f"countdown gives 3 or 4 numbers (countdown_numbers), got {numbers}.")
    if attempts < 0:
        raise ConfigError(
            f"countdown_attempts is the most failed attempts a demonstration shows: >= 0, got {attempts}."
        )


def prompt_len(numbers: int) -> int:
    """N digits, EQUALS and the target's three digits."""
    return numbers + 1 + TARGET_DIGITS


def step_width(step: int) -> int:
    """The most tokens step ``step`` (from 0) writes: two operands up to min(9^(step + 1), MOST) (a given digit or
    an earlier result), ``op``, ``=`` and a result up to min(9^(step + 2), MOST) (a product of step + 2 digits)."""
    operand, result = (len(str(min(9 ** (step + k), MOST))) for k in (1, 2))
    return 2 * operand + 2 + result


def solution_len(numbers: int) -> int:
    """The most tokens of N - 1 steps with the N - 2 STEPs between them and the closing ATTEMPT or EOS."""
    return sum(step_width(step) for step in range(numbers - 1)) + numbers - 1


def min_response_len(numbers: int, attempts: int) -> int:
    """The longest demonstration: K failed attempts, ANSWER and a solution (EOS included)."""
    return (attempts + 1) * solution_len(numbers) + 1


def default_response_len(numbers: int, attempts: int) -> int:
    """Four times a bound on the demonstrations' mean length, (K / 2 + 1) ``solution_len`` + 1, so that RL can
    lengthen responses well past what SFT shows (never below the longest demonstration)."""
    return math.ceil(4 * ((attempts / 2 + 1) * solution_len(numbers) + 1))


@functools.cache
def step_sequences(numbers: int) -> np.ndarray:
    """``[C, N - 1, 3]`` int32: every step sequence as (slot a, slot b, operation) per step. Slots 0..N-1 hold the
    given numbers, slot N + s the result of step s; each step picks two unused slots (a < b) and one of 4 ops."""
    rows = []

    def extend(free: tuple[int, ...], done: list) -> None:
        if len(done) == numbers - 1:
            rows.append(done)
            return
        for a, b in itertools.combinations(free, 2):
            rest = tuple(slot for slot in free if slot not in (a, b)) + (numbers + len(done),)
            for operation in range(4):
                extend(rest, [*done, (a, b, operation)])

    extend(tuple(range(numbers)), [])
    return np.array(rows, np.int32)


class Steps(NamedTuple):
    """Every step sequence of some given numbers: operands x >= y, operation and result ``[..., C, N - 1]``."""

    x: jax.Array
    y: jax.Array
    operation: jax.Array
    z: jax.Array
    valid: jax.Array  # [..., C] bool: every step exact, non-negative and at most MOST


def all_step_sequences(given: jax.Array) -> Steps:
    """``Steps`` of ``given [..., N]`` (values 1..9): each sequence of ``step_sequences(N)`` computed."""
    numbers = given.shape[-1]
    table = step_sequences(numbers)
    slots = np.eye(2 * numbers - 1, dtype=np.int32)
    pool = jnp.zeros(given.shape[:-1] + (table.shape[0], 2 * numbers - 1), jnp.int32)
    pool = pool.at[..., :numbers].set(given[..., None, :].astype(jnp.int32))
    valid = jnp.ones(pool.shape[:-1], bool)
    columns = []
    for step in range(numbers - 1):
        a, b = ((pool * slots[table[:, step, side]]).sum(-1) for side in (0, 1))
        x, y, operation = jnp.maximum(a, b), jnp.minimum(a, b), table[:, step, 2]
        safe_y = jnp.maximum(y, 1)
        z = jnp.select(
            [operation == ADD, operation == SUBTRACT, operation == MULTIPLY], [x + y, x - y, x * y], x // safe_y
        )
        exact = (operation != DIVIDE) | ((y > 0) & (x % safe_y == 0))
        valid = valid & exact & (z <= MOST)
        pool = pool.at[..., numbers + step].set(z)
        columns.append((x, y, jnp.broadcast_to(operation, z.shape), z))
    return Steps(*(jnp.stack(column, -1) for column in zip(*columns, strict=True)), valid)


def _pick(key: jax.Array, allowed: jax.Array, shape=None) -> jax.Array:
    """Indices ``[...]`` (or ``shape``) of sequences drawn uniformly where ``allowed [..., C]`` (0 where none is)."""
    return jax.random.categorical(key, jnp.where(allowed, 0.0, -jnp.inf), shape=shape)


def _picked(steps: Steps, index: jax.Array) -> tuple[jax.Array, ...]:
    """``(x, y, operation, z)``, each ``[..., N - 1]``, of sequence ``index [...]``."""
    return tuple(jnp.take_along_axis(v, index[..., None, None], -2)[..., 0, :] for v in steps[:4])


def prompt_tokens(given: jax.Array, target: jax.Array) -> jax.Array:
    """``[..., N + 4]``: ``given [..., N]`` digits, EQUALS, ``target [...]`` with three digits (zero-padded)."""
    place = 10 ** jnp.arange(TARGET_DIGITS - 1, -1, -1)
    equals = jnp.full(given.shape[:-1] + (1,), EQUALS, jnp.int32)
    return jnp.concatenate([digit_tokens(given), equals, digit_tokens(target[..., None] // place % 10)], -1)


def read_prompt(prompt: jax.Array, numbers: int) -> tuple[jax.Array, jax.Array]:
    """``(given [..., N], target [...])`` int32 of ``prompt [..., N + 4]``."""
    if prompt.shape[-1] != prompt_len(numbers):
        raise ConfigError(
            f"a countdown prompt of {numbers} numbers has {prompt_len(numbers)} tokens, got {prompt.shape[-1]}."
        )
    values = prompt.astype(jnp.int32) - DIGIT_0
    place = 10 ** jnp.arange(TARGET_DIGITS - 1, -1, -1)
    return values[..., :numbers], (values[..., numbers + 1 :] * place).sum(-1)


def sample_prompts(key: jax.Array, num: int, numbers: int) -> jax.Array:
    """``[num, N + 4]``: N digits uniform in 1..9 and the result of a uniformly drawn valid step sequence."""
    number_key, pick_key = jax.random.split(key)
    given = jax.random.randint(number_key, (num, numbers), 1, 10)
    steps = all_step_sequences(given)
    index = _pick(pick_key, steps.valid)
    return prompt_tokens(given, jnp.take_along_axis(steps.z[..., -1], index[..., None], -1)[..., 0])


def write_steps(x: jax.Array, y: jax.Array, operation: jax.Array, z: jax.Array, closing: int) -> jax.Array:
    """``[..., (N - 1) (3 * 3 + 3)]`` tokens and HOLEs: the steps ``x op y=z`` (``[..., N - 1]`` each), STEP
    between them and ``closing`` after the last."""
    separators = np.full(x.shape[-1], STEP, np.int32)
    separators[-1] = closing
    single = [
        jnp.broadcast_to(column[..., None], x.shape + (1,))
        for column in (PLUS + operation, jnp.asarray(EQUALS), separators)
    ]
    written = [number_slots(x, TARGET_DIGITS), single[0], number_slots(y, TARGET_DIGITS), single[1]]
    written = jnp.concatenate([*written, number_slots(z, TARGET_DIGITS), single[2]], -1)
    return written.reshape(x.shape[:-1] + (-1,))


def demonstrate(
    key: jax.Array, prompt: jax.Array, numbers: int, attempts: int, length: int, noise: jax.typing.ArrayLike
) -> jax.Array:
    """Demonstrations ``[..., length]`` for ``prompt [..., N + 4]`` (module docstring), each token then replaced with
    probability ``noise`` (``countdown_vocabulary.add_token_noise``). A drawn failed attempt is left out where
    every valid sequence reaches the target; a prompt no sequence solves gets a wrong solution."""
    longest = min_response_len(numbers, attempts)
    if length < longest:
        raise ConfigError(f"max_response_len must hold the longest demonstration: at least {longest}, got {length}.")
    given, target = read_prompt(prompt, numbers)
    steps = all_step_sequences(given)
    hits = steps.valid & (steps.z[..., -1] == target[..., None])
    misses = steps.valid & ~hits
    answer_key, attempt_key, count_key, noise_key = jax.random.split(key, 4)
    batch = target.shape
    failed = _pick(attempt_key, misses, (attempts,) + batch)
    count = jax.random.randint(count_key, batch, 0, attempts + 1)
    written = [
        jnp.where(((i < count) & misses.any(-1))[..., None], write_steps(*_picked(steps, failed[i]), ATTEMPT), HOLE)
        for i in range(attempts)
    ]
    marker = jnp.full(batch + (1,), ANSWER, jnp.int32)
    solution = write_steps(*_picked(steps, _pick(answer_key, hits)), EOS)
    return add_token_noise(noise_key, squeeze(jnp.concatenate([*written, marker, solution], -1), length), noise)
