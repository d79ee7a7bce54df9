"""Checking responses of the arithmetic tasks, and verifiable rewards (RLVR) for every task.

A rule, not a learned reward model, scores a response: the answer is correct or
not (Shao et al. 2024, DeepSeekMath; Lambert et al. 2024, Tulu 3, sec. 6), plus
DeepSeek-R1's format reward for a well-formed response (Guo et al. 2025, sec.
2.2.2) and DAPO's soft punishment of overlong responses (Yu et al. 2025, sec.
3.4, eq. 13).

Without a scratchpad the answer is the response up to its first EOS; with one,
it is what follows the first ANSWER marker, up to EOS: the scratchpad before the
marker is free and never checked.

Shapes: responses ``[..., L]`` int32, answers ``[..., L]`` (EOS-terminated, PAD
after), rewards ``[...]`` float32. ``scratchpad`` and lengths are static; reward
coefficients may be traced.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ppo_jax.errors import ConfigError
from ppo_jax.lm.tokens import end_at_eos, response_length, response_mask
from ppo_jax.lm.vocabulary import ANSWER, EOS, PAD, is_digit


def extract_answer(response: jax.Array, scratchpad: bool) -> tuple[jax.Array, jax.Array]:
    """The answer ``[..., L]`` of ``response [..., L]``, left-aligned, and whether the response is well formed ``[...]``.

    The answer keeps its EOS (then PAD), like the task's ``answer_tokens``; with a
    scratchpad and no marker it is all PAD. Well formed: the response ends with
    EOS (it was not cut at the maximum length), (scratchpad) exactly one ANSWER
    comes before that EOS, and the answer is one or more digits.
    """
    length = response.shape[-1]
    ended = end_at_eos(response)
    if scratchpad:
        is_marker = ended == ANSWER
        start = jnp.where(is_marker.any(-1), jnp.argmax(is_marker, -1) + 1, length)
        one_marker = is_marker.sum(-1) == 1
    else:
        start = jnp.zeros(response.shape[:-1], jnp.int32)
        one_marker = True
    index = start[..., None] + jnp.arange(length)
    answer = jnp.where(index < length, jnp.take_along_axis(ended, jnp.minimum(index, length - 1), -1), PAD)
    body = response_mask(answer) & (answer != EOS)  # the answer's tokens before its EOS
    digits_only = jnp.where(body, is_digit(answer), True).all(-1)
    well_formed = (response == EOS).any(-1) & one_marker & digits_only & body.any(-1)
    return answer, well_formed


def is_correct(answer: jax.Array, target: jax.Array) -> jax.Array:
    """``[...]`` float32 in {0, 1}: ``answer [..., L]`` equals ``target [..., M]`` up to and including EOS.

    ``target`` is the task's ``answer_tokens`` (EOS-terminated); an answer without
    EOS (a response cut at the maximum length) is never correct.
    """
    width = max(answer.shape[-1], target.shape[-1])

    def widen(tokens):
        return jnp.pad(end_at_eos(tokens), [(0, 0)] * (tokens.ndim - 1) + [(0, width - tokens.shape[-1])])

    return (widen(answer) == widen(target)).all(-1).astype(jnp.float32)


def overlong_penalty(response: jax.Array, max_response_len: int, buffer: int) -> jax.Array:
    """DAPO's soft overlong punishment ``[...]`` in [-1, 0] (Yu et al. 2025, eq. 13).

    With |y| the response length (EOS included), L_max = ``max_response_len`` and
    L_cache = ``buffer``: 0 if |y| <= L_max - L_cache, ``(L_max - L_cache - |y|) /
    L_cache`` up to L_max, and -1 for a response cut without EOS.
    """
    if buffer < 1:
        raise ConfigError(f"the overlong buffer must be at least 1 token, got {buffer}.")
    soft = (max_response_len - buffer - response_length(response)) / buffer
    ended = (response == EOS).any(-1)
    return jnp.where(ended, jnp.clip(soft, -1.0, 0.0), -1.0).astype(jnp.float32)


def verifiable_reward(correct: jax.Array, well_formed: jax.Array, *, format_reward: jax.typing.ArrayLike) -> jax.Array:
    """``correct + format_reward * well_formed``, ``[...]`` float32 (Guo et al. 2025, sec. 2.2.2; 0 turns format off)."""
    return (correct + format_reward * well_formed).astype(jnp.float32)
