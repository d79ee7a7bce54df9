"""``models.sample``: the sampler's own log-probs, for every architecture, and a bfloat16 sampler (``sampler_dtype``)
whose log-probs differ from the float32 trainer's by bfloat16 rounding: the mismatch the rollout reports."""

import dataclasses
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ppo_jax.errors import ConfigError
from ppo_jax.lm import problems, sampling, tokens
from ppo_jax.lm.config import LmConfig
from ppo_jax.lm.models import MODELS, generate, init_params, make_models, run, sample, sampler_model
from ppo_jax.lm.train import Pretrained, rollout
from ppo_jax.lm.validation import validate

FAST = {"xla_backend_optimization_level": 0}
CFG = LmConfig(
    digits=2, model_dim=32, num_layers=1, num_heads=2, embed_dim=8, hidden_dim=32, num_prompts=16, group_size=4,
    num_minibatches=1, temperature=0.8, top_k=6.0, top_p=0.95,
)  # fmt: skip
BATCH = 32


def policy(cfg):
    """A policy with logits of order 1 (head gain 1, not a fresh policy's 0.01), so the log-probs are a real test."""
    return MODELS[cfg.model].build(cfg, problems.vocab_size(cfg), problems.vocab_size(cfg), head_gain=1.0)


@partial(jax.jit, static_argnums=(0, 1), compiler_options=FAST)
def draw_and_rescore(sampler, trainer, params, key):
    """The sampler's ``(tokens, log-probs, generate's tokens)`` and the trainer's one-pass log-probs of those tokens."""
    prompt = problems.sample_prompts(CFG, jax.random.key(1), BATCH)
    length, knobs = problems.response_len(CFG), CFG.rollout_sampling
    response, log_probs = sample(sampler, params, key, prompt, length, knobs)
    logits = run(trainer, params, tokens.join(prompt, response)[:, :-1])[:, prompt.shape[1] - 1 :]
    rescored = sampling.token_log_prob(logits, response, knobs)
    return response, log_probs, generate(sampler, params, key, prompt, length, knobs), rescored


@pytest.mark.parametrize("model", ["decoder", "transformer", "gru"])
def test_the_samplers_log_probs_are_the_trainers(model):
    cfg = dataclasses.replace(CFG, model=model)
    net = policy(cfg)
    params = init_params(net, jax.random.key(0))
    response, log_probs, generated, rescored = draw_and_rescore(net, net, params, jax.random.key(2))
    np.testing.assert_array_equal(response, generated)  # sample draws generate's tokens
    mask = np.asarray(tokens.response_mask(response))
    assert not mask.all() and mask.any(), "some responses should end before the maximum length"
    np.testing.assert_array_equal(np.asarray(log_probs)[~mask], 0.0)
    assert np.asarray(log_probs)[mask].min() < -0.5  # not a degenerate distribution
    # this untrained policy samples PAD inside some responses: a token like any other to the sampler and the trainer
    # (the decoder masked it as padding once, which cost ~17 nats of mismatch on each such response)
    assert (mask & (np.asarray(response) == tokens.PAD)).any()
    np.testing.assert_allclose(np.asarray(log_probs)[mask], np.asarray(rescored)[mask], atol=2e-5)


def test_a_bfloat16_sampler_differs_from_the_float32_trainer_by_bfloat16_rounding():
    cfg = dataclasses.replace(CFG, model="decoder")
    trainer = policy(cfg)
    bf16 = sampler_model(dataclasses.replace(cfg, sampler_dtype="bfloat16"), trainer)
    assert bf16.config.compute_dtype == "bfloat16" and trainer.config.compute_dtype == "float32"
    params = init_params(trainer, jax.random.key(0))
    response, log_probs, _, rescored = draw_and_rescore(bf16, trainer, params, jax.random.key(3))
    mask = np.asarray(tokens.response_mask(response))
    gap = np.abs(np.asarray(log_probs) - np.asarray(rescored))[mask]
    # bfloat16 keeps 8 significant bits: a relative rounding of up to 2^-9 per operation, on logits of order 1, leaves
    # log-prob errors of order 1e-3..1e-2; float32 (24 bits) would leave 1e-7.
    assert 1e-4 < gap.mean() < 3e-2, gap.mean()
    assert gap.max() < 0.25, gap.max()
    # the bfloat16 sampler agrees with a bfloat16 rescoring far better than with the float32 trainer
    same_precision = draw_and_rescore(bf16, bf16, params, jax.random.key(3))[3]
    assert np.abs(np.asarray(log_probs) - np.asarray(same_precision))[mask].mean() < 0.2 * gap.mean()


def rollout_mismatch(sampler_dtype: str):
    cfg = dataclasses.replace(CFG, model="decoder", sampler_dtype=sampler_dtype)
    models = make_models(cfg)
    params = init_params(models.policy, jax.random.key(0))
    params = {**params, "head": params["head"] * 100.0}  # logits of order 1 instead of a fresh policy's 0.01
    shared = Pretrained(params, {}, *(jnp.zeros(()),) * 4)
    run_rollout = jax.jit(lambda: rollout(cfg, models, {"actor": params}, shared, cfg.beta, jax.random.key(4)))
    return run_rollout()


def test_the_rollout_records_the_samplers_log_probs_and_reports_the_mismatch():
    per_row = {}
    for dtype in ("bfloat16", ""):
        batch, metrics = rollout_mismatch(dtype)
        sampler, trainer = np.asarray(batch.sampler_log_prob, np.float64), np.asarray(batch.log_prob, np.float64)
        response = np.asarray(batch.sequence)[:, -sampler.shape[1] :]
        mask = np.asarray(tokens.response_mask(response))  # batch.mask (dynamic sampling is off)
        np.testing.assert_array_equal(mask, batch.mask)
        np.testing.assert_array_equal(sampler[~mask], 0.0)
        log_r = np.where(mask, trainer - sampler, 0.0)
        np.testing.assert_allclose(metrics["mismatch_kl"], -log_r.sum(-1).mean(), rtol=1e-4, atol=1e-7)
        k3 = (np.expm1(log_r) - log_r).sum(-1).mean()
        np.testing.assert_allclose(metrics["mismatch_k3_kl"], k3, rtol=1e-4, atol=1e-10)
        np.testing.assert_array_equal(metrics["rollout_is_mean"], 1.0)  # rollout_is none
        per_row[dtype] = (np.expm1(log_r) - log_r).sum(-1)
    # float32 sampling: the KV-cache decode and the one-pass trainer agree to float32 rounding; bfloat16: they do not
    assert per_row[""].max() < 1e-8
    assert per_row["bfloat16"].mean() > 1e-6


@pytest.mark.parametrize("model", ["gru", "transformer"])
def test_sampler_dtype_needs_a_decoder(model):
    with pytest.raises(ConfigError, match="sampler_dtype=bfloat16 needs .*decoder"):
        validate(dataclasses.replace(CFG, model=model, sampler_dtype="bfloat16"))


def test_sampler_dtype_names_are_checked():
    validate(dataclasses.replace(CFG, model="decoder", sampler_dtype="bfloat16"))
    with pytest.raises(ConfigError, match="sampler_dtype 'float64' .* float32, bfloat16"):
        validate(dataclasses.replace(CFG, model="decoder", sampler_dtype="float64"))
