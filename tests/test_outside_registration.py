"""Variants registered from outside the package (no file of ppo_jax/ edited) validate, train, sweep and report.

- an advantage estimator, "toy_median": each response's return minus the median return of its group;
- an LM problem, "toy_reverse": write the prompt backwards, then EOS (scored by the share of positions right);
- a PPO objective, "toy_hinge": max(r, 1 - eps) A, a one-sided clip;
- an LM policy loss, "toy_log_ratio": A log r (the log of the importance weight).

Each is checked against a reference worked here (NumPy loops, hand cases), then through the config
(allowed value, inert fields, its own checks); the estimator and the problem together through a sweep
of ``train`` and a report (one compiled program for both).
"""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ppo_jax import sweep
from ppo_jax.errors import ConfigError
from ppo_jax.lm import copy_task, problems, tokens
from ppo_jax.lm.advantages import ESTIMATORS, Estimator, estimate, sequence_returns
from ppo_jax.lm.config import LmConfig
from ppo_jax.lm.policy_objectives import POLICY_LOSSES, Objective, policy_loss
from ppo_jax.lm.problems import PROBLEMS, Problem, Verdict
from ppo_jax.lm.validation import validate
from ppo_jax.losses import OBJECTIVES
from ppo_jax.losses import Objective as PpoObjective
from ppo_jax.losses import policy_loss as ppo_policy_loss
from ppo_jax.report import make_report
from ppo_jax.rl.config import PPOConfig
from ppo_jax.rl.config import validate as validate_ppo

TRACED = []  # one entry each time an engine traces the estimator: proof that it ran


def median_baseline(rewards, mask, values, cfg):
    """``[M, L]``: R_i - median of R over i's group, on i's response tokens (no critic: targets None)."""
    TRACED.append(cfg.group_size)
    returns = sequence_returns(rewards, mask)
    median = jnp.repeat(jnp.median(returns.reshape(-1, cfg.group_size), axis=-1), cfg.group_size)
    return jnp.where(mask, (returns - median)[:, None], 0.0), None


class Reverse(Problem):
    """Write the prompt's content tokens backwards, then EOS (copy_task's vocabulary)."""

    doc = "write the prompt backwards, then stop"
    reads = ("vocab_size", "prompt_len")

    def vocab_size(self, cfg):
        return cfg.vocab_size

    def prompt_len(self, cfg):
        return cfg.prompt_len

    def min_response_len(self, cfg):
        return cfg.prompt_len + 1

    def describe(self, cfg):
        return f"reversing {cfg.prompt_len} tokens"

    def sample_prompts(self, cfg, key, num):
        return copy_task.sample_prompts(key, num, cfg.prompt_len, cfg.vocab_size)

    def demonstrate(self, cfg, key, prompt, length, noise):
        return copy_task.demonstrate(key, prompt[:, ::-1], length, cfg.vocab_size, noise)

    def verify(self, cfg, prompt, response):
        score = copy_task.score(prompt[:, ::-1], response)
        return Verdict((score == 1.0).astype(jnp.float32), score, tokens.ended(response))

    def check(self, cfg):
        if cfg.prompt_len < 2:
            raise ConfigError(f"reversing needs prompt_len >= 2, got {cfg.prompt_len}.")


def hinge(log_prob, old_log_prob, advantage, kl, *, clip_eps, kl_beta, dual_clip_c):
    return -jnp.maximum(jnp.exp(log_prob - old_log_prob), 1.0 - clip_eps) * advantage


def log_ratio_objective(terms, advantage, log_prob, mask, *, dual_clip, dual_clip_c):
    none = jnp.zeros_like(mask)
    return advantage * jnp.log(terms.ratio), none, none, none


@pytest.fixture(autouse=True, scope="module")
def registered():
    ESTIMATORS.register("toy_median", Estimator(median_baseline, "return minus the group median", needs_groups=True))
    PROBLEMS.register("toy_reverse", Reverse())
    OBJECTIVES.register("toy_hinge", PpoObjective(hinge, "max(r, 1 - eps) A", reads=("clip_eps",)))
    POLICY_LOSSES.register("toy_log_ratio", Objective(log_ratio_objective, "A log r", reads=("ratio",)))
    yield
    ESTIMATORS.unregister("toy_median")
    PROBLEMS.unregister("toy_reverse")
    OBJECTIVES.unregister("toy_hinge")
    POLICY_LOSSES.unregister("toy_log_ratio")


TINY = dict(
    problem="toy_reverse",
    vocab_size=6,
    prompt_len=3,
    num_prompts=4,
    group_size=3,
    num_minibatches=2,
    num_updates=2,
    model_dim=16,
    num_heads=2,
    num_layers=1,
    sft_steps=0,  # RL from the random initial policy: no SFT program to compile
    eval_prompts=4,
    advantage="toy_median",
)


def test_the_estimator_through_the_table_matches_a_numpy_loop():
    rng = np.random.default_rng(0)
    rewards = rng.normal(size=(6, 4)).astype(np.float32)
    mask = np.array([[t < n for t in range(4)] for n in (4, 2, 3, 1, 4, 2)])
    got, targets = estimate("toy_median", jnp.asarray(rewards), jnp.asarray(mask), None, LmConfig(**TINY))
    returns = np.where(mask, rewards, 0.0).sum(-1)
    for i in range(6):
        group = returns[3 * (i // 3) : 3 * (i // 3) + 3]
        np.testing.assert_allclose(got[i], np.where(mask[i], returns[i] - sorted(group)[1], 0.0), rtol=1e-6)
    assert targets is None


def test_the_config_derives_its_rules_from_the_entries():
    cfg = validate(LmConfig(**TINY))
    assert not cfg.uses_critic
    inert = cfg.inert_fields()
    for field in ("adv_eps", "gae_lambda", "vf_coef", "critic_lambda"):  # read by other estimators only
        assert inert[field].startswith("the advantage estimator toy_median does not read it (advantage: toy_median; ")
    assert {"digits", "scratchpad"} <= set(inert) and "prompt_len" not in inert  # the problem's reads
    with pytest.raises(ConfigError, match="needs group_size >= 2"):
        validate(LmConfig(**{**TINY, "group_size": 1, "num_minibatches": 1}))
    with pytest.raises(ConfigError, match="unknown advantage 'toy_medain'.*Did you mean: toy_median"):
        validate(LmConfig(**{**TINY, "advantage": "toy_medain"}))
    with pytest.raises(ConfigError, match="reversing needs prompt_len >= 2"):  # the problem's own check
        validate(LmConfig(**{**TINY, "prompt_len": 1}))


def test_the_problem_through_the_module_functions_worked_by_hand():
    cfg = LmConfig(**TINY)
    prompt = problems.sample_prompts(cfg, jax.random.key(0), 2)
    assert prompt.shape == (2, 3) and problems.response_len(cfg) == 3 + 1 + 2  # the default: longest + 2
    demo = np.asarray(problems.demonstrate(cfg, jax.random.key(1), prompt, 0.0))
    np.testing.assert_array_equal(demo[:, :3], np.asarray(prompt)[:, ::-1])
    assert (demo[:, 3] == tokens.EOS).all() and problems.describe(cfg) == "reversing 3 tokens"
    verdict = problems.verify(cfg, jnp.array([[2, 3, 4]]), jnp.array([[4, 3, 2, 1, 0, 0], [4, 9, 2, 1, 0, 0]]))
    np.testing.assert_allclose(verdict.score, [1.0, 0.75])  # 4 positions (3 tokens and EOS); one wrong
    np.testing.assert_array_equal(verdict.correct, [1.0, 0.0])


def test_a_ppo_objective_and_an_lm_policy_loss_from_outside():
    log_prob, old, adv = jnp.log(jnp.array([0.5, 1.2])), jnp.zeros(2), jnp.array([2.0, -1.0])
    loss = ppo_policy_loss("toy_hinge", log_prob, old, adv, jnp.zeros(2), clip_eps=0.2, kl_beta=0.0, dual_clip_c=3.0)
    np.testing.assert_allclose(loss, [-max(0.5, 0.8) * 2.0, max(1.2, 0.8) * 1.0], rtol=1e-6)
    inert = validate_ppo(PPOConfig(objective="toy_hinge")).inert_fields()
    assert "clip_eps" not in inert and {"kl_beta", "dual_clip_c"} <= set(inert)

    mask = jnp.array([[True, True, False]])
    per_token, _ = policy_loss(
        "toy_log_ratio", jnp.log(jnp.array([[0.5, 2.0, 7.0]])), jnp.zeros((1, 3)), jnp.ones((1, 3)), mask,
        eps_low=0.2, eps_high=0.2,
    )  # fmt: skip
    np.testing.assert_allclose(per_token, [[-np.log(0.5), -np.log(2.0), 0.0]], rtol=1e-6)
    lm_inert = validate(LmConfig(**{**TINY, "policy_loss": "toy_log_ratio"})).inert_fields()
    assert {"clip_eps_low", "clip_eps_high", "dual_clip"} <= set(lm_inert) and "ratio" not in lm_inert


def test_a_sweep_of_train_and_a_report_run_the_estimator_on_the_problem(tmp_path):
    """The sweep's program is the engine's ``train`` (``ppo_jax.lm.train``) vmapped over the 2 x 2 pairs."""
    TRACED.clear()
    spec = {"task": "lm", "name": "outside", "base": TINY, "grid": {"lr": [1e-4, 3e-4]}, "seeds": 2}
    table = sweep.run(spec, out=tmp_path / "sweep")
    assert TRACED and set(TRACED) == {3}  # the engine traced the estimator
    assert set(table["env"]) == {"toy_reverse"}  # the lm task's env column is its problem
    assert json.loads((tmp_path / "sweep" / "spec.json").read_text())["spec"]["base"]["advantage"] == "toy_median"
    assert len(table) == 2 * 2 * TINY["num_updates"] and np.isfinite(table["loss"]).all()
    assert ((table["accuracy"] >= 0) & (table["accuracy"] <= 1)).all()

    report = make_report([tmp_path / "sweep"], tmp_path / "report", reps=100)
    record = json.loads((report / "report.json").read_text())
    assert record["task"] == "lm" and record["score"]["metric"] == "accuracy"
