"""The lab's rollouts draw with temperature / top-k / top-p, and the loss scores that same distribution."""

import dataclasses
from functools import partial

import jax
import numpy as np
import pytest
from scipy import special

from ppo_jax.lm import pass_rates, problems
from ppo_jax.lm.config import LmConfig
from ppo_jax.lm.models import run
from ppo_jax.lm.token_loss import loss_from_outputs
from ppo_jax.lm.train import LmOutput, describe_shared, evaluate, make_models, pretrain, rollout
from tests.lm.test_sampling import kept_with_token, reference_log_probs

FAST = {"xla_backend_optimization_level": 0}
CFG = LmConfig(
    digits=2, num_layers=1, num_prompts=16, group_size=4, sft_steps=300, sft_target_accuracy=2.0, temperature=0.6, top_k=4.0,
    top_p=0.9, eval_prompts=32,
)  # fmt: skip


@pytest.fixture(scope="module")
def pre():
    return jax.jit(pretrain, compiler_options=FAST)(CFG, jax.random.key(0))


@pytest.fixture(scope="module")
def batch_and_logits(pre):
    """One rollout of the SFT model, and its teacher-forced logits ``[M, L, V]`` at the response positions."""
    models = make_models(CFG)

    @partial(jax.jit, compiler_options=FAST)
    def sample(pre):
        batch, metrics = rollout(CFG, models, {"actor": pre.sft}, pre, CFG.beta, jax.random.key(1))
        start = problems.prompt_len(CFG) - 1
        return batch, metrics, run(models.policy, pre.sft, batch.sequence[:, :-1])[:, start:]

    return sample(pre)


def test_rollout_tokens_come_from_the_truncated_tempered_distribution(batch_and_logits):
    batch, _, logits = batch_and_logits
    logits, response = np.asarray(logits), np.asarray(batch.sequence)[:, problems.prompt_len(CFG) :]
    mask = np.asarray(batch.mask)
    rows, steps = np.nonzero(mask)
    kept = [
        np.isfinite(reference_log_probs(logits[i, t], 0.6, 4, 0.9)[response[i, t]])
        for i, t in zip(rows, steps, strict=True)
    ]
    # the sampler's KV-cache logits and these one-pass ones agree to float rounding: a tie at the top-p edge may flip
    assert np.mean(kept) > 0.999


def test_the_old_log_probs_are_the_sampling_distributions_and_the_loss_reproduces_them(batch_and_logits):
    batch, _, logits = batch_and_logits
    logits, response = np.asarray(logits), np.asarray(batch.sequence)[:, problems.prompt_len(CFG) :]
    mask = np.asarray(batch.mask)
    expected = [
        np.log(kept_with_token(logits[i, t], response[i, t], 0.6, 4, 0.9)[response[i, t]])
        for i, t in zip(*np.nonzero(mask), strict=True)
    ]
    np.testing.assert_allclose(np.asarray(batch.log_prob)[mask], expected, atol=2e-5)
    # at the parameters that sampled, the loss's ratio is 1: no mismatch between what was drawn and what is scored
    # (the loss reads the logits of every input position; the prompt's rows are unused)
    prompt_len = problems.prompt_len(CFG)
    all_positions = np.pad(logits, ((0, 0), (prompt_len - 1, 0), (0, 0)))
    loss = jax.jit(lambda b, x: loss_from_outputs(x, None, b, CFG, CFG.beta, prompt_len=prompt_len))
    _, metrics = loss(batch, all_positions)
    assert abs(float(metrics["ratio_min"]) - 1) < 1e-5 and abs(float(metrics["ratio_max"]) - 1) < 1e-5
    # the raw softmax, which a loss without the knobs would score, is far from it: the bias this avoids
    raw = np.take_along_axis(special.log_softmax(logits, -1), response[..., None], -1)[..., 0]
    assert np.mean(np.abs(raw[mask] - np.asarray(batch.log_prob)[mask])) > 0.05


def test_evaluation_draws_with_the_eval_knobs(pre):
    """Greedy evaluation (eval_temperature 0, or top-k 1, or a tiny top-p): every sample of a prompt is the same, so
    pass@1 = pass@group; at temperature 1 they differ."""
    output = LmOutput({"actor": pre.sft}, {})
    evaluate_fast = jax.jit(evaluate, static_argnums=0, compiler_options=FAST)
    greedy = evaluate_fast(dataclasses.replace(CFG, eval_temperature=0.0), output, jax.random.key(2))
    assert greedy["eval_pass_at_1"] == greedy["eval_pass_at_group"]
    sampled = evaluate_fast(CFG, output, jax.random.key(2))
    assert sampled["eval_pass_at_1"] < sampled["eval_pass_at_group"]
    for knob in (dict(eval_top_k=1.0), dict(eval_top_p=1e-6)):  # each keeps only the most probable token: greedy
        evaluation = evaluate_fast(dataclasses.replace(CFG, **knob), output, jax.random.key(2))
        assert evaluation["eval_pass_at_1"] == evaluation["eval_pass_at_group"] == greedy["eval_pass_at_1"], knob


def test_the_evaluation_pass_at_k_curve_up_to_eval_samples(pre, monkeypatch):
    """16 samples per prompt: pass@k for k = 1, 2, 4, 8, 16 (pass@group = pass@4), NaN above; drawn in chunks."""
    monkeypatch.setattr(pass_rates, "MAX_ROWS", 64)  # 32 prompts x 16 samples: 8 chunks of 4 prompts
    cfg = dataclasses.replace(CFG, eval_samples=16)
    got = jax.jit(evaluate, static_argnums=0, compiler_options=FAST)(
        cfg, LmOutput({"actor": pre.sft}, {}), jax.random.key(3)
    )
    curve = [float(got[f"eval_pass_at_{k}"]) for k in (1, 2, 4, 8, 16)]
    assert all(a < b for a, b in zip(curve, curve[1:], strict=False))  # strictly rising: a mid-accuracy SFT model
    assert float(got["eval_pass_at_group"]) == curve[2]
    assert all(np.isnan(float(got[f"eval_pass_at_{k}"])) for k in (32, 64, 128, 256))
    described = describe_shared(cfg, pre)
    assert [described[f"sft_pass_at_{k}"] for k in (1, 2, 4, 8, 16)] == pytest.approx(curve, abs=0.15)
