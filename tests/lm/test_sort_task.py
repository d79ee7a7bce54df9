"""Sorting a digit list against Python's sorted(): prompts, answers, histograms and demonstrations."""

from collections import Counter

import jax
import numpy as np
import pytest

from ppo_jax.errors import ConfigError
from ppo_jax.lm import sort_task, verifier
from ppo_jax.lm.vocabulary import decode, encode

# Under jit with static sizes, and one batch shape throughout: few compilations (seconds on a loaded 2-core CPU).
sample_prompts = jax.jit(sort_task.sample_prompts, static_argnums=(1, 2))
answer_tokens = jax.jit(sort_task.answer_tokens, static_argnums=(1, 2))
demonstrate = jax.jit(sort_task.demonstrate, static_argnums=(2, 3), static_argnames="scratchpad")
extract_answer = jax.jit(verifier.extract_answer, static_argnums=1)
is_correct = jax.jit(verifier.is_correct)

K, B = 4, 128  # digits to sort, batch
L = sort_task.min_response_len(K, scratchpad=True)
HAND = "3103="  # worked by hand: sorted 0133, one 0, one 1, no 2, two 3s


def prompts(seed: int) -> np.ndarray:
    """``[B, K + 1]``: the hand case, then random prompts."""
    prompt = np.array(sample_prompts(jax.random.key(seed), B, K))
    prompt[0] = encode(HAND)
    return prompt


def python_listed(prompt) -> str:
    text = decode(prompt)
    assert text.endswith("=") and text[:-1].isdigit()
    return text[:-1]


def test_prompts_are_uniform_digits_then_equals():
    prompt = np.asarray(sample_prompts(jax.random.key(0), B, K))
    assert prompt.shape == (B, K + 1) and prompt.dtype == np.int32
    counts = Counter("".join(python_listed(p) for p in prompt))
    assert sorted(counts) == list("0123456789") and min(counts.values()) > 20  # 512 draws, 51 expected each


def test_answers_match_python_sorted():
    prompt = prompts(1)
    answer = np.asarray(answer_tokens(prompt, K, K + 2))
    for p, got in zip(prompt, answer, strict=True):
        assert decode(got) == "".join(sorted(python_listed(p))) + "._"
    assert decode(answer[0]) == "0133._"


def test_clean_demonstrations_are_correct_and_write_the_histogram():
    prompt = prompts(2)
    target = answer_tokens(prompt, K, K + 2)
    for scratchpad in (False, True):
        response = demonstrate(jax.random.key(3), prompt, K, L, scratchpad=scratchpad, noise=0.0)
        answer, well_formed = extract_answer(response, scratchpad)
        assert is_correct(answer, target).mean() == 1.0 and well_formed.all()
    for p, r in zip(prompt, np.asarray(response), strict=True):
        counts = Counter(python_listed(p))
        assert decode(r[:10]) == "".join(str(counts[d]) for d in "0123456789")
    assert decode(response[0]) == "1102000000|0133."


def test_noise_one_makes_demonstrations_wrong():
    prompt = prompts(4)
    target = answer_tokens(prompt, K, K + 2)
    response = demonstrate(jax.random.key(5), prompt, K, L, scratchpad=True, noise=1.0)  # traced: no recompilation
    assert is_correct(extract_answer(response, True)[0], target).mean() < 0.05


def test_sizes_are_checked():
    assert sort_task.min_response_len(4, False) == 5 and sort_task.min_response_len(4, True) == 16
    with pytest.raises(ConfigError):
        sort_task.demonstrate(jax.random.key(0), encode(HAND), K, L - 1, scratchpad=True, noise=0.0)
    with pytest.raises(ConfigError):  # counts of 10 digits do not fit in one digit
        sort_task.demonstrate(jax.random.key(0), encode("0123456789="), 10, 21, scratchpad=True, noise=0.0)
    with pytest.raises(ConfigError):
        sort_task.answer_tokens(encode(HAND), 5, 8)  # the prompt has 4 digits
