"""Countdown against plain Python: the verifier against a reference that parses the decoded text and keeps the
pool of numbers as a multiset of Python ints (Fractions for the arithmetic), prompts against a brute-force solver
over every expression tree, demonstrations against both."""

from __future__ import annotations

import dataclasses
import functools
import itertools
import re
from collections import Counter
from fractions import Fraction

import jax
import numpy as np
import pytest

from ppo_jax.errors import ConfigError
from ppo_jax.lm import countdown_task, problems
from ppo_jax.lm.config import LmConfig
from ppo_jax.lm.countdown_vocabulary import SYMBOLS, decode, encode
from ppo_jax.lm.validation import validate

CFG = validate(LmConfig(problem="countdown", countdown_numbers=4, countdown_attempts=2))
N, L, B = 4, problems.response_len(CFG), 1000  # one batch shape throughout: one compilation of each function
sample_prompts = jax.jit(lambda key, num: problems.sample_prompts(CFG, key, num), static_argnums=1)
demonstrate = jax.jit(lambda key, prompt, noise: problems.demonstrate(CFG, key, prompt, noise))
verify = jax.jit(lambda prompt, response: problems.verify(CFG, prompt, response))
KEY = jax.random.key(0)

# Worked by hand: 7 * 5 = 35, 35 - 3 = 32, 32 / 2 = 16 reaches 16 from 7, 5, 3, 2.
HAND_PROMPT = "7532=016"
HAND = {  # response: (correct, well_formed)
    "|7*5=35;35-3=32;32/2=16.": (1, True),
    "7+5=12;12*3=36;36/2=18,|7*5=35;35-3=32;32/2=16.": (1, True),  # a failed attempt, then the answer
    "|5*7=35;35-3=32;32/2=16.": (1, True),  # either operand order
    "|3-2=1;7*5=35;35+1=36.": (0, True),  # a right computation of another target
    "|7*5=35;35-3=32;32/2=15.": (0, True),  # wrong arithmetic
    "|7*5=35;35-5=30;30/2=15.": (0, True),  # 5 used twice, 3 never
    "|35-3=32;7*5=35;32/2=16.": (0, True),  # 35 used before it is computed
    "|2-3=1;7*5=35;35+1=36.": (0, True),  # a negative result
    "|7*5=35;35-3=32;32/2=16": (0, False),  # no EOS
    "7*5=35;35-3=32;32/2=16.": (0, False),  # no ANSWER
    "||7*5=35;35-3=32;32/2=16.": (0, False),  # two
    "|7*5=35;35-3=32.": (0, False),  # two steps of three
    "|7*5=35;35-3=32;32/2=16;.": (0, False),
}
STEP = r"(\d{1,4})([-+*/])(\d{1,4})=(\d{1,4})"


def python_steps(text: str) -> list[tuple[int, str, int, int]] | None:
    """``x op y=z`` steps of ``text`` (N - 1 of them, ``;`` between), or None."""
    found = re.fullmatch(";".join([STEP] * (N - 1)), text)
    if found is None:
        return None
    groups = found.groups()
    return [(int(groups[i]), groups[i + 1], int(groups[i + 2]), int(groups[i + 3])) for i in range(0, len(groups), 4)]


def python_result(numbers: list[int], steps) -> int | None:
    """The final number if ``steps`` are right and use each number of the multiset exactly once, else None."""
    pool = Counter(numbers)
    for x, op, y, z in steps:
        for operand in (x, y):
            if pool[operand] == 0:
                return None
            pool[operand] -= 1
        exact = {"+": Fraction(x + y), "-": Fraction(x - y), "*": Fraction(x * y), "/": Fraction(x, y) if y else None}
        if exact[op] != z:
            return None
        pool[z] += 1
    left = +pool
    return next(iter(left)) if sum(left.values()) == 1 else None


def python_verdict(prompt_text: str, response_text: str) -> tuple[int, bool]:
    numbers, target = [int(c) for c in prompt_text[:N]], int(prompt_text[N + 1 :])
    if "." not in response_text:
        return 0, False
    body = response_text[: response_text.index(".")]
    if body.count("|") != 1:
        return 0, False
    steps = python_steps(body.split("|")[1])
    if steps is None:
        return 0, False
    return int(python_result(numbers, steps) == target), True


@functools.cache
def reachable(values: tuple[int, ...]) -> frozenset[int]:
    """Every value of an expression tree over ``values`` (each used once; integer, non-negative, exact division)."""
    if len(values) == 1:
        return frozenset(values)
    found = set()
    for i, j in itertools.permutations(range(len(values)), 2):
        a, b = values[i], values[j]
        rest = tuple(v for k, v in enumerate(values) if k not in (i, j))
        results = {a + b, a * b} | ({a - b} if a >= b else set()) | ({a // b} if b and a % b == 0 else set())
        for c in results:
            found |= reachable(tuple(sorted((*rest, c))))
    return frozenset(found)


def tokens_of(texts: list[str]) -> np.ndarray:
    """``[B, L]``: each text encoded, cut at L, PAD after."""
    rows = np.zeros((len(texts), L), np.int32)
    for row, text in zip(rows, texts, strict=True):
        written = encode(text)[:L]
        row[: len(written)] = written
    return rows


def test_hand_worked_example():
    assert countdown_task.prompt_tokens(np.array([7, 5, 3, 2]), np.array(16)).tolist() == encode(HAND_PROMPT).tolist()
    assert 16 in reachable((2, 3, 5, 7))
    prompt = np.tile(encode(HAND_PROMPT), (B, 1))
    verdict = verify(prompt, tokens_of(list(HAND) * (B // len(HAND) + 1))[:B])
    got = list(zip(np.asarray(verdict.correct).tolist(), np.asarray(verdict.well_formed).tolist(), strict=True))
    assert got[: len(HAND)] == list(HAND.values())
    assert [python_verdict(HAND_PROMPT, text) for text in HAND] == list(HAND.values())


def test_every_prompt_is_solvable():
    three = dataclasses.replace(CFG, countdown_numbers=3)
    for numbers, prompt in [(4, sample_prompts(jax.random.key(0), B)), (3, problems.sample_prompts(three, KEY, B))]:
        prompt = np.asarray(prompt)
        assert prompt.shape == (B, numbers + 4)
        targets = []
        for text in map(decode, prompt):
            given, target = text[:numbers], text[numbers + 1 :]
            assert set(given) <= set("123456789") and text[numbers] == "=" and target.isdigit(), text
            assert int(target) in reachable(tuple(sorted(map(int, given)))), text
            targets.append(int(target))
        assert len(set(targets)) > 40 and max(targets) >= 100  # many targets, up to three digits


def test_clean_demonstrations_are_right_and_show_failed_attempts():
    prompt = np.asarray(sample_prompts(jax.random.key(0), B))
    demo = np.asarray(demonstrate(jax.random.key(1), prompt, 0.0))
    verdict = verify(prompt, demo)
    assert np.asarray(verdict.correct).all() and np.asarray(verdict.well_formed).all()
    counts, lengths = [], []
    for p, d in zip(map(decode, prompt), map(decode, demo), strict=True):
        assert python_verdict(p, d) == (1, True)
        text = d.rstrip("_")
        lengths.append(len(text))
        attempts = text.split("|")[0].split(",")[:-1]
        numbers, target = [int(c) for c in p[:N]], int(p[N + 1 :])
        for attempt in attempts:  # a valid search step that missed
            steps = python_steps(attempt)
            assert steps is not None and python_result(numbers, steps) not in (None, target), (p, d)
        counts.append(len(attempts))
    assert set(counts) == {0, 1, 2} and min(np.bincount(counts)) > 250  # k ~ U{0..2}: 333 expected of each
    assert max(lengths) <= problems.min_response_len(CFG) == 88
    assert L == 236 >= 4 * np.mean(lengths), np.mean(lengths)  # RL has room to search longer than SFT shows


def twice(step: re.Match) -> int:
    """The result of the first step's y op y (its given number y used twice, right arithmetic)."""
    y = int(step[2])
    return {"+": 2 * y, "-": 0, "*": y * y, "/": 1}[step[1]]


CORRUPTIONS = {
    "arithmetic": lambda s, r: re.sub(r"=(\d+)", lambda m: f"={int(m.group(1)) + r.integers(1, 3)}", s, count=1),
    "reuse": lambda s, r: re.sub(r"^\|\d([-+*/])(\d)=\d+", lambda m: f"|{m[2]}{m[1]}{m[2]}={twice(m)}", s),
    "operands swapped": lambda s, r: re.sub(r"(\d+)([-/])(\d+)", r"\3\2\1", s, count=1),
    "last step first": lambda s, r: "|" + ";".join(s[1:-1].split(";")[-1:] + s[1:-1].split(";")[:-1]) + ".",
    "no answer marker": lambda s, r: s.replace("|", ""),
    "two markers": lambda s, r: "|" + s,
    "no EOS": lambda s, r: s[:-1],
    "a step missing": lambda s, r: s.split(";")[0] + ";" + s.split(";")[-1],
    "a step more": lambda s, r: s[:-1] + ";1+1=2.",
    "a symbol replaced": lambda s, r: (lambda i: s[:i] + SYMBOLS[r.integers(1, 20)] + s[i + 1 :])(r.integers(len(s))),
    "a symbol deleted": lambda s, r: (lambda i: s[:i] + s[i + 1 :])(r.integers(len(s))),
}


def test_verifier_agrees_with_python_on_corrupted_solutions():
    rng = np.random.default_rng(0)
    prompt = np.concatenate([sample_prompts(jax.random.key(2), B), sample_prompts(jax.random.key(3), B)])
    demo = np.concatenate([demonstrate(jax.random.key(4), half, 0.0) for half in np.split(prompt, 2)])
    noisy = np.concatenate([demonstrate(jax.random.key(5), half, 0.03) for half in np.split(prompt, 2)])
    prompt_texts, texts, kinds, changed = [], [], [], []
    names = ["clean", "noise", "wrong target", *CORRUPTIONS]
    for p, d, n in zip(map(decode, prompt), map(decode, demo), map(decode, noisy), strict=True):
        kind = names[rng.integers(len(names))]
        solution = "|" + d.rstrip("_").split("|")[1]
        if kind == "wrong target":
            p = p[: N + 1] + f"{(int(p[N + 1 :]) + rng.integers(1, 50)) % 1000:03d}"
        text = {"clean": d, "noise": n}.get(kind) or CORRUPTIONS.get(kind, lambda s, r: s)(solution, rng)
        prompt_texts.append(p), texts.append(text), kinds.append(kind), changed.append(text != solution)
    prompts, responses = tokens_of(prompt_texts)[:, : N + 4], tokens_of(texts)
    verdicts = [verify(*halves) for halves in zip(np.split(prompts, 2), np.split(responses, 2), strict=True)]
    got = np.concatenate([np.stack([v.correct, v.well_formed], -1) for v in verdicts])
    expected = np.array([python_verdict(p, decode(r)) for p, r in zip(prompt_texts, responses, strict=True)])
    cases = zip(kinds, prompt_texts, responses, got, expected, strict=True)
    wrong = [(kind, p, decode(r)) for kind, p, r, g, e in cases if any(g != e)]
    assert not wrong, wrong[:5]
    kinds = np.array(kinds)
    by_kind = {kind: expected[kinds == kind].mean(0) for kind in names}
    assert by_kind["clean"].tolist() == [1, 1] and by_kind["arithmetic"].tolist() == [0, 1]
    assert by_kind["no EOS"][1] == by_kind["two markers"][1] == 0
    reused = expected[(kinds == "reuse") & np.array(changed), 0]
    assert reused.mean() < 0.05  # right only where equal given numbers make the change harmless
    assert 0 < expected[:, 0].mean() < 0.5 and 0.3 < expected[:, 1].mean() < 0.9  # a mix of every verdict


def test_noise_one_makes_demonstrations_wrong():
    prompt = sample_prompts(jax.random.key(6), B)
    assert np.asarray(verify(prompt, demonstrate(jax.random.key(7), prompt, 1.0)).correct).mean() < 0.01


def test_settings_are_checked():
    for bad in ({"countdown_numbers": 5}, {"countdown_numbers": 2}, {"countdown_attempts": -1}):
        with pytest.raises(ConfigError):
            validate(dataclasses.replace(CFG, **bad))
    with pytest.raises(ConfigError):
        validate(dataclasses.replace(CFG, max_response_len=87))  # the longest demonstration is 88 tokens
    assert {"digits", "scratchpad", "scratchpad_filler"} <= set(CFG.inert_fields())
    assert "countdown_numbers" in LmConfig().inert_fields() and "countdown_attempts" not in CFG.inert_fields()
