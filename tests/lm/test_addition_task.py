"""n-digit addition against Python integers: prompts, answers, carries and demonstrations."""

import jax
import numpy as np
import pytest

from ppo_jax.errors import ConfigError
from ppo_jax.lm import addition_task, verifier
from ppo_jax.lm.vocabulary import decode, encode

# Under jit with static sizes, and one batch shape throughout: few compilations (seconds on a loaded 2-core CPU).
sample_prompts = jax.jit(addition_task.sample_prompts, static_argnums=(1, 2))
operands = jax.jit(addition_task.operands, static_argnums=1)
answer_tokens = jax.jit(addition_task.answer_tokens, static_argnums=(1, 2))
demonstrate = jax.jit(addition_task.demonstrate, static_argnums=(2, 3), static_argnames="scratchpad")
extract_answer = jax.jit(verifier.extract_answer, static_argnums=1)
is_correct = jax.jit(verifier.is_correct)

N, B = 3, 128  # digits, batch
L = addition_task.min_response_len(N, scratchpad=True)
# Worked by hand (operands least significant digit first): 0 + 0 = 0; 999 + 999 = 1998 (a carry out: four
# digits); 12 + 34 = 46 (no zeros on top); 5 + 5 = 10; 95 + 7 = 102 (carries out of 5 + 7, 9 + 0 + 1, 0 + 0 + 1).
HAND = ["000+000=", "999+999=", "210+430=", "500+500=", "590+700="]
HAND_ANSWERS = ["0.___", "8991.", "64.__", "01.__", "201._"]
HAND_SCRATCHPAD = "110|201._"


def prompts(seed: int) -> np.ndarray:
    """``[B, 2N + 2]``: the hand cases, then random prompts."""
    prompt = np.array(sample_prompts(jax.random.key(seed), B, N))
    prompt[: len(HAND)] = [encode(text) for text in HAND]
    return prompt


def python_operands(prompt) -> tuple[int, int]:
    """Read ``a+b=`` (least significant digit first) with str and int."""
    a, b = decode(prompt).removesuffix("=").split("+")
    return int(a[::-1]), int(b[::-1])


def python_carries(a: int, b: int, digits: int) -> list[int]:
    carry, chain = 0, []
    for i in range(digits):
        carry = int((a // 10**i) % 10 + (b // 10**i) % 10 + carry >= 10)
        chain.append(carry)
    return chain


def test_prompts_hold_uniform_operands_read_back_by_python():
    prompt = np.asarray(sample_prompts(jax.random.key(0), B, N))
    assert prompt.shape == (B, 2 * N + 2) and prompt.dtype == np.int32
    a, b = operands(prompt, N)
    expected = np.array([python_operands(p) for p in prompt])
    np.testing.assert_array_equal(np.stack([a, b], -1), expected)
    assert expected.min() < 50 and expected.max() > 950  # spans [0, 10^n)


def test_answers_match_python_sums():
    prompt = prompts(1)
    answer = np.asarray(answer_tokens(prompt, N, N + 2))
    for p, got in zip(prompt, answer, strict=True):
        a, b = python_operands(p)
        assert decode(got).rstrip("_") == str(a + b)[::-1] + "."
    assert [decode(t) for t in answer[: len(HAND)]] == HAND_ANSWERS


def test_clean_demonstrations_are_correct_and_carry_the_carries():
    prompt = prompts(2)
    target = answer_tokens(prompt, N, N + 2)
    for scratchpad in (False, True):
        response = demonstrate(jax.random.key(3), prompt, N, L, scratchpad=scratchpad, noise=0.0)
        answer, well_formed = extract_answer(response, scratchpad)
        assert is_correct(answer, target).mean() == 1.0 and well_formed.all()
    chains = [python_carries(*python_operands(p), N) for p in prompt]
    written = [[int(symbol) for symbol in decode(r[:N])] for r in np.asarray(response)]
    np.testing.assert_array_equal(written, chains)
    assert decode(response[len(HAND) - 1]) == HAND_SCRATCHPAD


def test_noise_one_makes_demonstrations_wrong():
    prompt = prompts(4)
    target = answer_tokens(prompt, N, N + 2)
    response = demonstrate(jax.random.key(5), prompt, N, L, scratchpad=True, noise=1.0)  # traced: no recompilation
    assert is_correct(extract_answer(response, True)[0], target).mean() < 0.05


def test_sizes_are_checked():
    prompt = encode("59+70=")
    assert addition_task.min_response_len(2, False) == 4 and addition_task.min_response_len(2, True) == 7
    with pytest.raises(ConfigError):
        addition_task.demonstrate(jax.random.key(0), prompt, 2, 6, scratchpad=True, noise=0.0)
    with pytest.raises(ConfigError):
        addition_task.answer_tokens(prompt, 3, 8)  # the prompt has 2 digits
