"""Chain sums: the sum of K numbers, with written-out work that can be short or long (RLVR, as ``addition_task``).

**Prompt** ``[..., K (n + 1)]``: n_1 PLUS n_2 PLUS ... n_K EQUALS. Each number is
uniform in [0, 10^n) and written with exactly n digits, least significant first
(reversed digits, as ``addition_task``: Lee et al. 2023).

**Answer**: n_1 + ... + n_K, least significant digit first, without zeros at its
most significant end, then EOS.

**Scratchpad** (``scratchpad=True``): the response may first write the running
partial sums s_2 = n_1 + n_2, s_3 = s_2 + n_3, ..., s_K (each written as the
answer is, separated by PLUS), then ANSWER, the answer and EOS: a multi-step
chain of thought (Nye et al. 2021, "Show your work: scratchpads for intermediate
computation with language models"). Each demonstration writes the first m of the
K - 1 partial sums, m ~ U{0..K-1}: demonstrations teach both the shortcut (m = 0)
and the whole chain, so under RL the work, and the response length, are free to
grow or shrink. Only the answer after ANSWER is checked (``verifier.extract_answer``).

Example (K = 4, n = 2; 12 + 34 + 56 + 78 = 180): prompt ``21+43+65+87=``, answer
``081.``; with the whole chain (46, 102, 180) ``64+201+081|081.``, with m = 1
``64|081.``, with m = 0 ``|081.`` (symbols of ``vocabulary.decode``).

Sizes (``chain_len`` K, ``digits`` n, lengths) are static Python ints; ``noise``
may be traced. Sums are int32: K (10^n - 1) < 2^31 (``check``).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from ppo_jax.errors import ConfigError
from ppo_jax.lm.vocabulary import (
    ANSWER,
    EOS,
    EQUALS,
    PAD,
    PLUS,
    add_token_noise,
    digit_tokens,
    digit_values,
    written_demonstration,
)

INT32_MAX = 2**31 - 1


def width(count: int, digits: int) -> int:
    """The most digits a sum of ``count`` numbers of n digits has: those of count (10^n - 1)."""
    return len(str(count * (10**digits - 1)))


def check(chain_len: int, digits: int) -> None:
    """ConfigError for a chain that is not a sum (K < 2) or whose sum may overflow int32."""
    if chain_len < 2:
        raise ConfigError(f"chain_sum adds chain_len >= 2 numbers, got chain_len={chain_len}.")
    if chain_len * (10**digits - 1) > INT32_MAX:
        raise ConfigError(
            f"the sum of chain_len={chain_len} numbers of digits={digits} digits reaches "
            f"{chain_len * (10**digits - 1)}, past int32 ({INT32_MAX}): use fewer digits or a shorter chain."
        )


def prompt_len(chain_len: int, digits: int) -> int:
    """K numbers of n digits, K - 1 PLUS and EQUALS."""
    return chain_len * (digits + 1)


def work_len(chain_len: int, digits: int) -> int:
    """The longest written work: the K - 1 partial sums s_2 .. s_K at their widest, PLUS between them."""
    return sum(width(count, digits) for count in range(2, chain_len + 1)) + chain_len - 2


def min_response_len(chain_len: int, digits: int, scratchpad: bool) -> int:
    """The longest demonstration: the widest answer and EOS, plus the whole work and ANSWER with the scratchpad."""
    answer = width(chain_len, digits) + 1
    return answer + (work_len(chain_len, digits) + 1 if scratchpad else 0)


def mean_response_len_bound(chain_len: int, digits: int, scratchpad: bool) -> float:
    """An upper bound on the demonstrations' mean length: E[m] = (K - 1) / 2 widest partial sums and separators."""
    answer = width(chain_len, digits) + 1
    if not scratchpad:
        return answer
    return answer + 1 + (chain_len - 1) / 2 * (width(chain_len, digits) + 1)


def default_response_len(chain_len: int, digits: int, scratchpad: bool) -> int:
    """The longest answer + 2; with the scratchpad 4x the demonstrations' mean length (room to write more work)."""
    if not scratchpad:
        return min_response_len(chain_len, digits, False) + 2
    return math.ceil(4 * mean_response_len_bound(chain_len, digits, True))  # always >= the longest


def sample_prompts(key: jax.Array, num: int, chain_len: int, digits: int) -> jax.Array:
    """``[num, K (n + 1)]`` prompts with K numbers uniform in [0, 10^n) (each digit uniform)."""
    listed = digit_tokens(jax.random.randint(key, (num, chain_len, digits), 0, 10))
    ends = jnp.full((num, chain_len, 1), PLUS, jnp.int32).at[:, -1].set(EQUALS)
    return jnp.concatenate([listed, ends], axis=-1).reshape(num, prompt_len(chain_len, digits))


def numbers(prompt: jax.Array, chain_len: int, digits: int) -> jax.Array:
    """The K numbers ``[..., K]`` int32 read from ``prompt [..., K (n + 1)]``."""
    if prompt.shape[-1] != prompt_len(chain_len, digits):
        raise ConfigError(
            f"a chain of {chain_len} numbers of {digits} digits has {prompt_len(chain_len, digits)} prompt tokens, "
            f"got {prompt.shape[-1]}."
        )
    written = digit_values(prompt.reshape(prompt.shape[:-1] + (chain_len, digits + 1))[..., :digits])
    return (written * 10 ** jnp.arange(digits, dtype=jnp.int32)).sum(-1)


def partial_sums(prompt: jax.Array, chain_len: int, digits: int) -> jax.Array:
    """``[..., K - 1]`` int32: s_2 .. s_K, s_j = n_1 + ... + n_j (s_K is the answer)."""
    return jnp.cumsum(numbers(prompt, chain_len, digits), axis=-1)[..., 1:]


def _written(value: jax.Array, size: int) -> tuple[jax.Array, jax.Array]:
    """``value [...]`` as digit tokens ``[..., size]`` least significant first, and its length ``[...]`` (``0``: 1)."""
    place = jnp.arange(size)
    digit = (value[..., None] // 10 ** place.astype(jnp.int32)) % 10
    length = jnp.maximum(jnp.where(digit != 0, place + 1, 0).max(-1), 1)
    return digit_tokens(digit), length


def answer_tokens(prompt: jax.Array, chain_len: int, digits: int, max_len: int) -> jax.Array:
    """The target ``[..., max_len]``: the sum least significant digit first (no zeros at its top end), EOS, PAD."""
    size = width(chain_len, digits)
    if max_len < size + 1:
        raise ConfigError(f"max_len must hold {size} digits and EOS: at least {size + 1}, got {max_len}.")
    total = numbers(prompt, chain_len, digits).sum(-1)
    written, length = _written(total, size)
    position = jnp.arange(max_len)
    written = jnp.pad(written, [(0, 0)] * total.ndim + [(0, max_len - size)])
    return jnp.where(position < length[..., None], written, jnp.where(position == length[..., None], EOS, PAD))


def _work_slots(prompt: jax.Array, chain_len: int, digits: int, shown: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The work in fixed slots ``[..., W]`` (W = ``work_len``) and which are written ``[..., W]`` bool.

    Slots: s_2 .. s_K each at its widest, PLUS before each but the first; written are
    the significant digits of the first m = ``shown [...]`` sums and the PLUS between them.
    """
    slots, kept = [], []
    for j, value in enumerate(jnp.moveaxis(partial_sums(prompt, chain_len, digits), -1, 0)):
        written, length = _written(value, width(j + 2, digits))
        shows = (j < shown)[..., None]
        if j:
            slots.append(jnp.full(shows.shape, PLUS, jnp.int32))
            kept.append(shows)
        slots.append(written)
        kept.append(shows & (jnp.arange(written.shape[-1]) < length[..., None]))
    return jnp.concatenate(slots, axis=-1), jnp.concatenate(kept, axis=-1)


def demonstrate(
    key: jax.Array,
    prompt: jax.Array,
    chain_len: int,
    digits: int,
    max_response_len: int,
    *,
    scratchpad: bool,
    noise: jax.typing.ArrayLike,
) -> jax.Array:
    """Demonstrations ``[..., L]`` for ``prompt [..., K (n + 1)]``: [m partial sums, ANSWER,] answer, EOS, then PAD.

    With the scratchpad, m ~ U{0..K-1} per demonstration: the work's slots, ANSWER
    and the answer are laid out at their widest, then the unwritten slots dropped
    (a stable sort moves the kept tokens left). ``noise`` (scalar or broadcastable
    to ``[..., 1]``): the probability that a token is replaced by a uniform one
    (``vocabulary.add_token_noise``); 0 gives clean ones.
    """
    longest = min_response_len(chain_len, digits, scratchpad)
    if not scratchpad:
        return written_demonstration(
            key,
            prompt,
            None,
            lambda room: answer_tokens(prompt, chain_len, digits, room),
            max_response_len,
            noise,
            longest=longest,
        )
    if max_response_len < longest:
        raise ConfigError(
            f"max_response_len must hold the longest demonstration: at least {longest}, got {max_response_len}."
        )
    shown_key, noise_key = jax.random.split(key)
    shown = jax.random.randint(shown_key, prompt.shape[:-1], 0, chain_len)
    slots, kept = _work_slots(prompt, chain_len, digits, shown)
    answer = answer_tokens(prompt, chain_len, digits, width(chain_len, digits) + 1)
    marker = jnp.full(prompt.shape[:-1] + (1,), ANSWER, jnp.int32)
    slots = jnp.concatenate([slots, marker, answer], axis=-1)
    kept = jnp.concatenate([kept, jnp.ones(marker.shape, bool), answer != PAD], axis=-1)
    order = jnp.argsort(~kept, axis=-1, stable=True)
    clean = jnp.where(jnp.take_along_axis(kept, order, -1), jnp.take_along_axis(slots, order, -1), PAD)
    clean = jnp.pad(clean, [(0, 0)] * (clean.ndim - 1) + [(0, max_response_len - longest)])
    return add_token_noise(noise_key, clean, noise)
