"""``scratchpad_filler``: demonstrations open the scratchpad with k ~ U{0..F} random digits and are otherwise the
plain demonstration; Python reads every answer back and checks the sum."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np

from ppo_jax.lm import addition_task, problems
from ppo_jax.lm.config import LmConfig
from ppo_jax.lm.validation import validate
from ppo_jax.lm.vocabulary import decode

CFG = validate(LmConfig(digits=2, scratchpad=True, scratchpad_filler=4))


def test_filler_opens_the_scratchpad_with_zero_to_f_digits_and_keeps_the_answer():
    prompts = problems.sample_prompts(CFG, jax.random.key(0), 500)
    demos = np.asarray(problems.demonstrate(CFG, jax.random.key(1), prompts, 0.0))
    plain_cfg = dataclasses.replace(CFG, scratchpad_filler=0)
    plain = np.asarray(addition_task.demonstrate(jax.random.key(2), prompts, 2, 18, scratchpad=True, noise=0.0))
    assert (
        problems.min_response_len(CFG) == problems.min_response_len(plain_cfg) + 4 == 11
    )  # 2 carries + ANSWER + 3 digits + EOS + 4
    assert demos.shape == (500, problems.response_len(CFG)) == (500, 22)  # twice the longest demonstration
    counts = []
    for prompt, demo, reference in zip(np.asarray(prompts), demos, plain, strict=True):
        text, expected = decode(demo).rstrip("_"), decode(reference).rstrip("_")
        k = len(text) - len(expected)
        assert 0 <= k <= 4 and text[k:] == expected and all(c in "0123456789" for c in text[:k]), (text, expected)
        a, b = decode(prompt).removesuffix("=").split("+")
        assert text.split("|")[1] == str(int(a[::-1]) + int(b[::-1]))[::-1] + "."  # the sum, reversed
        counts.append(k)
    assert set(counts) == {0, 1, 2, 3, 4} and min(np.bincount(counts)) > 60  # uniform: 100 expected of each
    verdict = problems.verify(CFG, prompts, demos)
    assert np.asarray(verdict.correct).all() and np.asarray(verdict.well_formed).all()


def test_filler_is_refused_as_an_axis_without_a_scratchpad():
    assert "scratchpad_filler" in LmConfig(scratchpad=False).inert_fields()
    assert "scratchpad_filler" not in CFG.inert_fields()
