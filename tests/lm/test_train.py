"""SFT, the Bradley-Terry reward model and token-level PPO end to end, on tiny models (a few seconds each)."""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ppo_jax.lm import copy_task
from ppo_jax.lm.config import RlhfConfig
from ppo_jax.lm.copy_task import score as programmatic_score
from ppo_jax.lm.metrics import METRIC_NAMES
from ppo_jax.lm.reward_model import learned_score, pairwise_accuracy, preference_pairs
from ppo_jax.lm.sft import demonstration_nll
from ppo_jax.lm.train import make_models, pretrain, train

TINY = RlhfConfig(
    hidden_dim=32, num_prompts=64, num_minibatches=4, update_epochs=4, num_updates=16, sft_steps=200, rm_steps=200
)
# Compilation dominates these tests (the runs take a second or two): XLA's backend optimization
# level 0 halves it on a 2-core CPU, at the price of slower code.
FAST = {"xla_backend_optimization_level": 0}


@pytest.fixture(scope="module")
def pretrained():
    return jax.jit(pretrain, compiler_options=FAST)(TINY, jax.random.key(0))


@pytest.fixture(scope="module")
def held_out(pretrained):
    """The SFT model's NLL of fresh demonstrations and the reward model's accuracy on fresh pairs, in one program."""
    models = make_models(TINY)

    @partial(jax.jit, compiler_options=FAST)
    def evaluate(pre):
        prompt = copy_task.sample_prompts(jax.random.key(7), 256, TINY.prompt_len, TINY.vocab_size)
        demos = copy_task.demonstrate(
            jax.random.key(8), prompt, TINY.max_response_len, TINY.vocab_size, TINY.demo_noise
        )
        pairs = preference_pairs(jax.random.key(9), TINY, 512)
        pred_a = learned_score(models.scalar, pre.reward_model, pairs.prompt, pairs.response_a)
        pred_b = learned_score(models.scalar, pre.reward_model, pairs.prompt, pairs.response_b)
        true_a = programmatic_score(pairs.prompt, pairs.response_a)
        true_b = programmatic_score(pairs.prompt, pairs.response_b)
        return {
            "nll": demonstration_nll(models.policy, pre.sft, prompt, demos),
            "accuracy": pairwise_accuracy(pred_a, pred_b, true_a, true_b),
        }

    return {name: float(value) for name, value in evaluate(pretrained).items()}


@pytest.fixture(scope="module")
def traced_train():
    """jit(vmap(train)) over stacked settings, with a count of its traces."""
    traces = []

    def run(cfg, key, pre):
        traces.append(1)
        return train(cfg, key, pre)

    return jax.jit(jax.vmap(run, in_axes=(0, None, None)), compiler_options=FAST), traces


def _stack(*cfgs):
    return jax.tree.map(lambda *x: jnp.stack(x), *cfgs)


def test_sft_lowers_the_nll_of_held_out_demonstrations(pretrained, held_out):
    # Before: the first SFT step's loss, on demonstrations not yet trained on. A fresh policy is near
    # uniform (head gain 0.01), so that is log(vocab_size) = 2.30. The demonstrator's own entropy per
    # token, about 1.1 nats (0.73 on the intended token, 0.033 on each of the 8 others), is a floor.
    before = float(pretrained.sft_loss[0])
    assert before == pytest.approx(np.log(TINY.vocab_size), abs=0.05)
    assert 1.0 < held_out["nll"] < before - 0.3, (before, held_out["nll"])


def test_reward_model_ranks_held_out_pairs_above_chance(pretrained, held_out):
    assert held_out["accuracy"] > 0.7, held_out  # chance is 0.5
    assert pretrained.rm_loss[-20:].mean() < pretrained.rm_loss[:20].mean()


def test_ppo_raises_the_score_and_beta_does_not_recompile(pretrained, traced_train):
    fn, traces = traced_train
    key = jax.random.key(3)
    out = fn(_stack(TINY.replace(beta=np.float32(0.0)), TINY.replace(beta=np.float32(0.05))), key, pretrained)
    assert set(out.metrics) == set(METRIC_NAMES)
    assert out.metrics["score"].shape == (2, TINY.num_updates)
    score = np.asarray(out.metrics["score"])
    gain = score[:, -3:].mean(1) - score[:, :3].mean(1)
    assert np.all(gain > 0.1), gain  # measured: 0.22 and 0.24 (per-update noise ~0.07)
    assert np.all(np.isfinite(np.asarray(out.metrics["loss"])))
    kl = np.asarray(out.metrics["kl_ref"])
    assert np.all(kl[:, 0] < 1e-5)  # the actor starts as the reference
    assert kl[0, -4:].mean() > kl[1, -4:].mean()  # the KL penalty keeps the policy closer to the reference
    np.testing.assert_allclose(out.metrics["learning_rate"], 1e-3, rtol=1e-6)  # lr_schedule constant (the default)
    # Other values of every traced leaf reuse the program.
    other = fn(
        _stack(
            TINY.replace(beta=np.float32(0.3), clip_eps_low=np.float32(0.1), ent_coef=np.float32(0.01)),
            TINY.replace(beta=np.float32(0.01), lr=np.float32(3e-4), gamma=np.float32(0.9)),
        ),
        key,
        pretrained,
    )
    assert len(traces) == 1
    np.testing.assert_allclose(other.metrics["learning_rate"][:, 0], [1e-3, 3e-4], rtol=1e-6)  # the lr leaf took effect


def test_without_evaluation_prompts_the_evaluation_scalars_are_nan():
    """eval_prompts 0: no final evaluation is drawn (a decoder once failed reshaping 0 rows); each scalar is NaN."""
    from ppo_jax.lm.config import LmConfig
    from ppo_jax.lm.metrics import eval_names
    from ppo_jax.lm.models import init_params
    from ppo_jax.lm.train import LmOutput, evaluate

    cfg = LmConfig(model="decoder", digits=1, model_dim=16, num_layers=1, num_heads=2, sft_steps=0, eval_prompts=0)
    output = LmOutput({"actor": init_params(make_models(cfg).policy, jax.random.key(0))}, {})
    values = evaluate(cfg, output, jax.random.key(1))
    assert set(values) == set(eval_names(cfg)) and all(np.isnan(float(v)) for v in values.values())
