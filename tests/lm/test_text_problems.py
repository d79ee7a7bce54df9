"""Text problems through a checkpoint's tokenizer: the id relabelling, the Python scorer, and the host callbacks.

Fixtures: the committed tiny Qwen2 checkpoint (tokenizer: <|endoftext|> = 0 is its
pad, <|im_end|> = 2 its EOS), so the engine sees <|im_end|> as id 1.
"""

from __future__ import annotations

import re
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ppo_jax.lm import decoder, tokens
from ppo_jax.lm.checkpoint_model import checkpoint_vocab_map, init_params
from ppo_jax.lm.checkpoint_vocab import VocabMap
from ppo_jax.lm.checkpoints import load_checkpoint
from ppo_jax.lm.config import LmConfig
from ppo_jax.lm.models import make_models
from ppo_jax.lm.problems import PROBLEMS

QWEN2 = Path(__file__).parent / "fixtures" / "checkpoints" / "qwen2"
CFG = LmConfig(problem="text_addition", model=str(QWEN2), digits=2)
PROBLEM = PROBLEMS["text_addition"]


def test_the_checkpoint_pad_and_eos_become_engine_ids_0_and_1():
    mapping = checkpoint_vocab_map(CFG)
    assert (mapping.pad, mapping.eos) == (0, 2)
    order = mapping.order()
    assert order[tokens.PAD] == 0 and order[tokens.EOS] == 2 and sorted(order) == list(range(300))
    ids = np.array([[5, 2, 0, 1, 299]])
    np.testing.assert_array_equal(mapping.to_checkpoint(mapping.to_engine(ids)), ids)


def test_relabelled_weights_compute_the_same_function():
    """Engine logits on engine ids are the checkpoint's logits on its ids, columns relabelled the same way."""
    ck = load_checkpoint(QWEN2)
    mapping = VocabMap(0, 2, ck.config.vocab_size)
    policy = make_models(CFG).policy
    params = init_params(policy, jax.random.key(0))  # the source's weights, relabelled
    ids = np.array([[7, 8, 2, 9, 10, 0]], np.int32)
    mask = np.array([[1, 1, 1, 1, 1, 0]], np.int32)
    theirs = np.asarray(ck.logits(ids, mask))[:, :, mapping.order()]
    logits = jax.jit(decoder.logits, static_argnums=0)
    ours = np.asarray(logits(policy, params, jnp.asarray(mapping.to_engine(ids)), jnp.asarray(mask)))
    np.testing.assert_allclose(ours[mask == 1], theirs[mask == 1], atol=1e-5)
    back = mapping.params_to_checkpoint(params)
    np.testing.assert_array_equal(np.asarray(back["embed"]), np.asarray(ck.params["embed"]))


def reference_score(question: str, response: str) -> float:
    """Independent checker: the two operands by splitting the words, the first run of digits in the response."""
    words = question.replace("?", "").split()
    total = int(words[2]) + int(words[4])
    digits = ""
    for position, char in enumerate(response):
        if char.isdigit():
            digits = char
            for follow in response[position + 1 :]:
                if not follow.isdigit():
                    break
                digits += follow
            negative = position > 0 and response[position - 1] == "-"
            return float((-int(digits) if negative else int(digits)) == total)
    return 0.0


def test_the_scorer_agrees_with_an_independent_checker_on_thousands_of_cases():
    rng = np.random.default_rng(0)
    task = PROBLEM.task
    for _ in range(3000):
        question = task.question(rng, CFG)
        assert re.fullmatch(r"What is \d{2} \+ \d{2}\?", question)
        right = task.demonstration(question)
        wrong = str(int(right) + int(rng.integers(1, 20)) * int(rng.choice([-1, 1])))
        for response in (right, wrong, f"The answer is {right}.", f"{wrong} or {right}", "no idea", f"-{right}"):
            assert task.score(question, response) == reference_score(question, response), (question, response)


def test_prompts_are_left_padded_text_the_same_for_the_same_key_under_jit_and_vmap():
    sample = jax.jit(lambda key: PROBLEM.sample_prompts(CFG, key, 5))
    keys = jax.random.split(jax.random.key(3), 2)
    batched = np.asarray(jax.jit(jax.vmap(lambda key: PROBLEM.sample_prompts(CFG, key, 5)))(keys))
    for index in range(2):
        np.testing.assert_array_equal(batched[index], np.asarray(sample(keys[index])))
    prompts = batched[0]
    assert prompts.shape == (5, PROBLEM.prompt_len(CFG))
    for row in prompts:
        first = np.flatnonzero(row != tokens.PAD)[0]
        assert (row[:first] == tokens.PAD).all() and (row[first:] != tokens.PAD).all()
        assert re.fullmatch(r"What is \d{2} \+ \d{2}\?\n", PROBLEM.decode(CFG, row))
    assert not np.array_equal(batched[0], batched[1])


def test_verify_scores_decoded_responses_under_vmap():
    prompts = np.asarray(PROBLEM.sample_prompts(CFG, jax.random.key(0), 4))
    questions = [PROBLEM.decode(CFG, row) for row in prompts]
    answers = [PROBLEM.task.demonstration(q) for q in questions]
    texts = [answers[0], str(int(answers[1]) + 1), f"it is {answers[2]}", "?"]
    width = 8
    responses = np.zeros((4, width), np.int32)
    for row, text in enumerate(texts):
        ids = np.append(PROBLEM.encode(CFG, text), tokens.EOS)
        responses[row, : ids.size] = ids
    verdict = jax.jit(jax.vmap(lambda p, r: PROBLEM.verify(CFG, p, r)))(prompts[None], responses[None])
    np.testing.assert_array_equal(np.asarray(verdict.correct)[0], [1.0, 0.0, 1.0, 0.0])
    assert np.asarray(verdict.well_formed).all()


def test_demonstrations_are_the_answers_then_eos():
    prompts = PROBLEM.sample_prompts(CFG, jax.random.key(1), 3)
    demo = np.asarray(PROBLEM.demonstrate(CFG, jax.random.key(2), prompts, 6, 0.0))
    for prompt, row in zip(np.asarray(prompts), demo, strict=True):
        assert PROBLEM.decode(CFG, row) == PROBLEM.task.demonstration(PROBLEM.decode(CFG, prompt))
        assert tokens.EOS in row.tolist()


def test_a_text_problem_needs_a_checkpoint():
    from ppo_jax.errors import ConfigError
    from ppo_jax.lm.validation import validate

    with pytest.raises(ConfigError, match="pass --model DIR"):
        validate(LmConfig(problem="text_addition", model="decoder"))
