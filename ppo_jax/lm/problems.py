"""The problem of a run (``cfg.problem``): one interface over the addition, sort and copy tasks.

Every function takes the config first and dispatches on its static ``problem``:
vocabulary and sizes, prompts, demonstrations (SFT data and preference pairs),
and ``verify``, the rule that scores a response. Shapes: prompts ``[B, P]``,
responses ``[B, L]`` (EOS-terminated, PAD after), scores ``[B]`` float32.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from ppo_jax.lm import addition_task, copy_task, sort_task, verifier, vocabulary

ARITHMETIC = {"addition": addition_task, "sort": sort_task}


class Verdict(NamedTuple):
    correct: jax.Array  # [B] float32 in {0, 1}: the whole answer right
    score: jax.Array  # [B] float32: the programmatic score (copy: the share of positions right; else = correct)
    well_formed: jax.Array  # [B] bool: ends with EOS (with a scratchpad: one answer marker, a digit answer)


def vocab_size(cfg) -> int:
    return cfg.vocab_size if cfg.problem == "copy" else vocabulary.VOCAB_SIZE


def prompt_len(cfg) -> int:
    if cfg.problem == "copy":
        return cfg.prompt_len
    return 2 * cfg.digits + 2 if cfg.problem == "addition" else cfg.digits + 1


def filler(cfg) -> int:
    """The most random digits a demonstration opens its scratchpad with (0 without a scratchpad)."""
    return cfg.scratchpad_filler if cfg.scratchpad and cfg.problem != "copy" else 0


def min_response_len(cfg) -> int:
    """The longest intended response (EOS included)."""
    if cfg.problem == "copy":
        return cfg.prompt_len + 1
    return ARITHMETIC[cfg.problem].min_response_len(cfg.digits, cfg.scratchpad) + filler(cfg)


def response_len(cfg) -> int:
    """``max_response_len``, or its default (0): the longest intended response + 2, with a scratchpad twice it."""
    if cfg.max_response_len:
        return cfg.max_response_len
    needed = min_response_len(cfg)
    return 2 * needed if cfg.scratchpad and cfg.problem != "copy" else needed + 2


def describe(cfg) -> str:
    if cfg.problem == "copy":
        return f"the copy task ({cfg.prompt_len} tokens)"
    what = f"{cfg.digits}-digit addition" if cfg.problem == "addition" else f"sorting {cfg.digits} digits"
    if not cfg.scratchpad:
        return what
    return (
        what + " with a scratchpad" + (f" (opened by 0..{cfg.scratchpad_filler} random digits)" if filler(cfg) else "")
    )


def sample_prompts(cfg, key: jax.Array, num: int) -> jax.Array:
    if cfg.problem == "copy":
        return copy_task.sample_prompts(key, num, cfg.prompt_len, cfg.vocab_size)
    return ARITHMETIC[cfg.problem].sample_prompts(key, num, cfg.digits)


def demonstrate(cfg, key: jax.Array, prompt: jax.Array, noise: jax.typing.ArrayLike) -> jax.Array:
    """Demonstrations ``[B, L]`` for ``prompt``: each token replaced with probability ``noise``; with
    ``scratchpad_filler`` F, each opens with k ~ U{0..F} random digits (``open_with_filler``)."""
    length = response_len(cfg)
    if cfg.problem == "copy":
        return copy_task.demonstrate(key, prompt, length, cfg.vocab_size, noise)
    most = filler(cfg)
    key, filler_key = jax.random.split(key) if most else (key, None)
    task = ARITHMETIC[cfg.problem]
    demo = task.demonstrate(key, prompt, cfg.digits, length - most, scratchpad=cfg.scratchpad, noise=noise)
    return open_with_filler(filler_key, demo, most) if most else demo


def open_with_filler(key: jax.Array, demo: jax.Array, most: int) -> jax.Array:
    """``[B, L + most]``: each row of ``demo [B, L]`` after k ~ U{0..most} uniformly random digit tokens, PAD after.

    Built as [``most`` random digits, demo] shifted left by most - k, the freed tail set to PAD.
    """
    count_key, digit_key = jax.random.split(key)
    batch = demo.shape[:-1]
    count = jax.random.randint(count_key, batch + (1,), 0, most + 1)
    digits = vocabulary.digit_tokens(jax.random.randint(digit_key, batch + (most,), 0, 10))
    full = jnp.concatenate([digits, demo], axis=-1)
    position = jnp.arange(full.shape[-1]) + (most - count)
    shifted = jnp.take_along_axis(full, jnp.minimum(position, full.shape[-1] - 1), axis=-1)
    return jnp.where(position < full.shape[-1], shifted, copy_task.PAD)


def verify(cfg, prompt: jax.Array, response: jax.Array) -> Verdict:
    """Whether each response is right, its programmatic score and whether it is well formed."""
    if cfg.problem == "copy":
        score = copy_task.score(prompt, response)
        ended = (response == copy_task.EOS).any(-1)
        return Verdict((score == 1.0).astype(jnp.float32), score, ended)
    answer, well_formed = verifier.extract_answer(response, cfg.scratchpad)
    target = ARITHMETIC[cfg.problem].answer_tokens(prompt, cfg.digits, response.shape[-1])
    correct = verifier.is_correct(answer, target)
    return Verdict(correct, correct, well_formed)
