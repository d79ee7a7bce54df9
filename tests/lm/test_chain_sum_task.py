"""chain_sum against Python integers: prompts, answers, the verifier on corrupted responses, demonstrations' work."""

from __future__ import annotations

import dataclasses
import re

import jax
import numpy as np
import pytest

from ppo_jax.errors import ConfigError
from ppo_jax.lm import chain_sum_task, problems
from ppo_jax.lm.config import LmConfig
from ppo_jax.lm.validation import validate
from ppo_jax.lm.vocabulary import decode, encode

K, N, B = 4, 2, 2048  # numbers, digits each, batch
CFG = validate(LmConfig(problem="chain_sum", chain_len=K, digits=N, scratchpad=True))
PLAIN = dataclasses.replace(CFG, scratchpad=False)
# Worked by hand (numbers least significant digit first): 12 + 34 + 56 + 78 = 180 via 46, 102; 0 + 0 + 0 + 0 = 0;
# 99 x 4 = 396 via 198, 297; 10 + 0 + 0 + 0 = 10 (no zeros on top: "01").
HAND = ["21+43+65+87=", "00+00+00+00=", "99+99+99+99=", "01+00+00+00="]
HAND_WORK = [["64", "201", "081"], ["0", "0", "0"], ["891", "792", "693"], ["01", "01", "01"]]
HAND_ANSWERS = ["081.", "0.", "693.", "01."]


@jax.jit
def prompts_and_demos(key):
    prompt_key, demo_key, plain_key = jax.random.split(key, 3)
    prompt = problems.sample_prompts(CFG, prompt_key, B)
    prompt = prompt.at[: len(HAND)].set(np.array([encode(text) for text in HAND]))
    return prompt, problems.demonstrate(CFG, demo_key, prompt, 0.0), problems.demonstrate(PLAIN, plain_key, prompt, 0.0)


verify = jax.jit(problems.verify, static_argnums=0)
answer_tokens = jax.jit(chain_sum_task.answer_tokens, static_argnums=(1, 2, 3))
numbers = jax.jit(chain_sum_task.numbers, static_argnums=(1, 2))


def python_numbers(prompt) -> list[int]:
    """Read ``n1+n2+...=`` (least significant digit first) with str and int."""
    return [int(number[::-1]) for number in decode(prompt).removesuffix("=").split("+")]


def python_verdict(prompt, response, scratchpad: bool) -> tuple[bool, bool]:
    """(correct, well formed) from the rules in words: the text after the first ``|`` (scratchpad) up to the first
    ``.`` is the sum reversed; well formed: a ``.``, one ``|`` before it, and one or more digits after it."""
    text = decode(response)
    if "." not in text:
        return False, False
    text = text[: text.index(".")]
    if scratchpad and "|" not in text:
        return False, False
    answer = text.split("|", 1)[1] if scratchpad else text
    correct = answer == str(sum(python_numbers(prompt)))[::-1]
    well_formed = (text.count("|") == 1 or not scratchpad) and re.fullmatch("[0-9]+", answer) is not None
    return correct, well_formed


def written_work(demo) -> list[str]:
    work = decode(demo).split("|")[0]
    return work.split("+") if work else []


def test_prompts_hold_uniform_numbers_read_back_by_python():
    prompt = np.asarray(problems.sample_prompts(CFG, jax.random.key(0), B))
    assert prompt.shape == (B, K * (N + 1)) == (B, problems.prompt_len(CFG))
    expected = np.array([python_numbers(p) for p in prompt])
    np.testing.assert_array_equal(numbers(prompt, K, N), expected)
    assert expected.min() == 0 and expected.max() == 99 and abs(expected.mean() - 49.5) < 1.5


def test_answers_match_python_sums():
    prompt, _, _ = prompts_and_demos(jax.random.key(1))
    answer = np.asarray(answer_tokens(prompt, K, N, 6))
    for p, got in zip(np.asarray(prompt), answer, strict=True):
        assert decode(got).rstrip("_") == str(sum(python_numbers(p)))[::-1] + "."
    assert [decode(a).rstrip("_") for a in answer[: len(HAND)]] == HAND_ANSWERS


def test_clean_demonstrations_are_right_and_write_right_partial_sums_spread_over_zero_to_k_minus_one():
    prompt, demo, plain = (np.asarray(x) for x in prompts_and_demos(jax.random.key(2)))
    counts = []
    for p, d, q in zip(prompt, demo, plain, strict=True):
        numbers = python_numbers(p)
        running = [str(sum(numbers[:j]))[::-1] for j in range(2, K + 1)]
        work = written_work(d)
        assert work == running[: len(work)], (decode(p), decode(d))
        assert decode(d).rstrip("_") == "+".join(work) + "|" + str(sum(numbers))[::-1] + "."
        assert decode(q).rstrip("_") == str(sum(numbers))[::-1] + "."
        counts.append(len(work))
    assert set(counts) == set(range(K)) and min(np.bincount(counts)) > B / K * 0.85  # uniform: B / K of each
    for cfg, response in ((CFG, demo), (PLAIN, plain)):
        verdict = verify(cfg, prompt, response)
        assert np.asarray(verdict.correct).all() and np.asarray(verdict.well_formed).all()


def test_hand_worked_examples():
    prompt, demo, _ = prompts_and_demos(jax.random.key(3))
    for text, d, work, answer in zip(HAND, np.asarray(demo), HAND_WORK, HAND_ANSWERS, strict=False):
        m = len(written_work(d))
        assert decode(d).rstrip("_") == "+".join(work[:m]) + "|" + answer, text
    whole = encode("64+201+081|081.")
    response = np.zeros((1, problems.response_len(CFG)), np.int32)
    response[0, : len(whole)] = whole
    assert np.asarray(verify(CFG, prompt[:1], response).correct) == [1.0]


def corrupted(prompt, demo, rng) -> list[str]:
    """A response per row: the demonstration, a token noised, the answer's top digit dropped or a zero put on top,
    EOS dropped, a second marker, the last partial sum written as the answer, or the answer alone."""
    text = decode(demo).rstrip("_")
    work, answer = text[: text.index("|") + 1], text[text.index("|") + 1 : -1]
    choice = rng.integers(8)
    if choice == 1:
        position = rng.integers(len(text))
        text = text[:position] + "_.0123456789+=|"[rng.integers(1, 15)] + text[position + 1 :]
    elif choice == 2:
        text = work + answer[:-1] + "."
    elif choice == 3:
        text = work + answer + "0."
    elif choice == 4:
        text = text[:-1]
    elif choice == 5:
        text = work + "|" + answer + "."
    elif choice == 6:
        numbers = python_numbers(prompt)
        text = work + str(sum(numbers[:-1]))[::-1] + "."
    elif choice == 7:
        text = answer + "."
    return text


def test_the_verifier_agrees_with_python_on_thousands_of_corrupted_responses():
    rng = np.random.default_rng(0)
    prompt, demo, _ = (np.asarray(x) for x in prompts_and_demos(jax.random.key(4)))
    length = problems.response_len(CFG)
    texts = [corrupted(p, d, rng) for p, d in zip(prompt, demo, strict=True)]
    response = np.zeros((B, length), np.int32)
    for row, text in zip(response, texts, strict=True):
        row[: len(text)] = encode(text)
    right = {}
    for cfg, scratchpad in ((CFG, True), (PLAIN, False)):
        verdict = verify(cfg, prompt, response)
        expected = np.array([python_verdict(p, r, scratchpad) for p, r in zip(prompt, response, strict=True)])
        np.testing.assert_array_equal(np.asarray(verdict.correct), expected[:, 0])
        np.testing.assert_array_equal(np.asarray(verdict.well_formed), expected[:, 1])
        right[scratchpad] = expected[:, 0].mean()
    assert 0.15 < right[True] < 0.35 and 0.08 < right[False] < 0.17  # both kinds of case are many


def test_default_cap_is_four_times_the_demonstrations_mean_length():
    _, demo, plain = (np.asarray(x) for x in prompts_and_demos(jax.random.key(5)))
    mean = (demo != 0).sum(-1).mean()
    longest = 3 + 3 + 3 + 2 + 1 + 3 + 1  # three 3-digit partial sums, two PLUS, ANSWER, a 3-digit answer, EOS
    assert problems.min_response_len(CFG) == longest and (demo != 0).sum(-1).max() == longest
    assert problems.response_len(CFG) == demo.shape[-1] == 44 >= 4 * mean
    assert problems.response_len(PLAIN) == plain.shape[-1] == 3 + 1 + 2  # the answer and EOS, + 2
    for k, n in ((2, 1), (2, 9), (3, 5), (9, 1), (20, 3)):  # the cap holds the longest demonstration
        assert chain_sum_task.default_response_len(k, n, True) >= chain_sum_task.min_response_len(k, n, True)


def test_noise_is_traced_and_settings_vmap():
    prompt, _, _ = prompts_and_demos(jax.random.key(6))
    noise = np.linspace(0.0, 1.0, 3, dtype=np.float32)
    keys = jax.random.split(jax.random.key(7), 3)
    demo = jax.jit(jax.vmap(lambda key, q: problems.demonstrate(CFG, key, prompt, q)))(keys, noise)
    right = jax.vmap(lambda d: verify(CFG, prompt, d).correct.mean())(demo)
    assert right[0] == 1.0 and right[2] < 0.05


@pytest.mark.parametrize(
    ("fields", "message"),
    [({"chain_len": 1}, "chain_len >= 2"), ({"chain_len": 3, "digits": 9}, "past int32")],
)
def test_bad_settings_are_refused(fields, message):
    with pytest.raises(ConfigError, match=message):
        validate(dataclasses.replace(CFG, **fields))
    validate(dataclasses.replace(CFG, chain_len=2, digits=9))  # 2 x 999999999 still fits


def test_chain_len_is_read_only_by_chain_sum():
    assert "chain_len" in LmConfig(problem="addition").inert_fields()
    assert "chain_len" not in CFG.inert_fields() and "scratchpad_filler" in CFG.inert_fields()
