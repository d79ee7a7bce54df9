"""Answer extraction, correctness, DAPO's overlong penalty and the verifiable reward, on responses built by hand."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ppo_jax.errors import ConfigError
from ppo_jax.lm import verifier
from ppo_jax.lm.vocabulary import decode, encode

extract_answer = jax.jit(verifier.extract_answer, static_argnums=1)
is_correct = jax.jit(verifier.is_correct)
overlong_penalty = jax.jit(verifier.overlong_penalty, static_argnums=(1, 2))


def batch(texts: list[str]) -> np.ndarray:
    """Responses ``[len(texts), 8]`` from text (``vocabulary.SYMBOLS``; ``_`` is PAD)."""
    return np.stack([encode(text.ljust(8, "_")) for text in texts])


# (response, extracted answer, well formed), worked by hand.
PLAIN = [
    ("64.", "64.", True),
    ("64.5=|..", "64.", True),  # everything after the first EOS is ignored
    ("64646464", "64646464", False),  # cut at the maximum length: no EOS
    (".", ".", False),  # empty answer
    ("6+4.", "6+4.", False),  # a non-digit in the answer
    ("1|64.", "1|64.", False),  # a marker is not a digit
]
SCRATCHPAD = [
    ("11|201.", "201.", True),
    ("|5.", "5.", True),  # an empty scratchpad is fine
    ("1=+_|5.", "5.", True),  # the scratchpad is free
    ("11|2|01.", "2|01.", False),  # two markers
    ("11201.", "", False),  # no marker: no answer
    ("11|.", ".", False),  # empty answer
    ("11|2=1.", "2=1.", False),  # a non-digit in the answer
    ("1|201201", "201201", False),  # cut at the maximum length: no EOS
    ("11.|201.", "", False),  # the marker comes after EOS
]


@pytest.mark.parametrize("cases, scratchpad", [(PLAIN, False), (SCRATCHPAD, True)])
def test_extract_answer_and_well_formed(cases, scratchpad):
    responses, answers, well_formed = zip(*cases, strict=True)
    answer, formed = extract_answer(batch(list(responses)), scratchpad)
    assert [decode(a) for a in np.asarray(answer)] == [a.ljust(8, "_") for a in answers]
    assert list(np.asarray(formed)) == list(well_formed)


def test_is_correct_matches_up_to_and_including_eos():
    target = encode("201._")[None]  # [1, 5]: answers of width 8 are compared with a narrower target
    answers = batch(["201.", "201.77", "2010.", "20.", "201", "201_.", "102."])
    np.testing.assert_array_equal(is_correct(answers, target), [1, 1, 0, 0, 0, 0, 0])
    assert is_correct(encode("201.____")[None], encode("201._____________")[None]) == 1.0  # a wider target


def test_overlong_penalty_at_the_boundaries():
    # L_max = 8, L_cache = 4: no penalty up to 4 tokens, then -1/4 per token, -1 at 8 tokens or without EOS.
    lengths = ["1.", "123.", "1234.", "12345.", "123456.", "1234567.", "12345678"]
    np.testing.assert_allclose(overlong_penalty(batch(lengths), 8, 4), [0, 0, -0.25, -0.5, -0.75, -1, -1])
    np.testing.assert_allclose(overlong_penalty(batch(["1234567.", "1234."]), 8, 1), [-1, 0])  # buffer 1: a cliff
    with pytest.raises(ConfigError):
        verifier.overlong_penalty(batch(["1."]), 8, 0)


def test_verifiable_reward_with_a_traced_format_coefficient():
    correct = jnp.array([1.0, 1.0, 0.0, 0.0])
    well_formed = jnp.array([True, False, True, False])
    reward = jax.jit(lambda c: verifier.verifiable_reward(correct, well_formed, format_reward=c))
    np.testing.assert_allclose(reward(jnp.float32(0.0)), [1, 1, 0, 0])
    np.testing.assert_allclose(reward(jnp.float32(0.2)), [1.2, 1, 0.2, 0])
    assert reward(jnp.float32(0.2)).dtype == jnp.float32
