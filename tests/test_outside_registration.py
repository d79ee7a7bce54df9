"""A new advantage estimator registered from outside the package (no file of ppo_jax/ edited) runs end to end.

The estimator, "toy_median": each response's return minus the median return of its
group, on every response token. Checked against a NumPy loop, then through the
config (allowed value, inert fields, the group-size rule), a sweep of ``train`` and a report.
"""

from __future__ import annotations

import json

import jax.numpy as jnp
import numpy as np
import pytest

from ppo_jax import sweep
from ppo_jax.errors import ConfigError
from ppo_jax.lm.advantages import ESTIMATORS, Estimator, estimate, sequence_returns
from ppo_jax.lm.config import LmConfig
from ppo_jax.lm.validation import validate
from ppo_jax.report import make_report

NAME = "toy_median"
TRACED = []  # one entry each time an engine traces the estimator: proof that it ran


def median_baseline(rewards, mask, values, cfg):
    """``[M, L]``: R_i - median of R over i's group, on i's response tokens (no critic: targets None)."""
    TRACED.append(cfg.group_size)
    returns = sequence_returns(rewards, mask)
    median = jnp.repeat(jnp.median(returns.reshape(-1, cfg.group_size), axis=-1), cfg.group_size)
    return jnp.where(mask, (returns - median)[:, None], 0.0), None


@pytest.fixture(autouse=True, scope="module")
def registered():
    ESTIMATORS.register(NAME, Estimator(median_baseline, "return minus the group median", needs_groups=True))
    yield
    ESTIMATORS.unregister(NAME)


TINY = dict(
    digits=1,
    num_prompts=4,
    group_size=3,
    num_minibatches=2,
    num_updates=2,
    model_dim=16,
    num_heads=2,
    num_layers=1,
    sft_steps=0,  # RL from the random initial policy: no SFT program to compile
    eval_prompts=4,
    advantage=NAME,
)


def test_the_estimator_through_the_table_matches_a_numpy_loop():
    rng = np.random.default_rng(0)
    rewards = rng.normal(size=(6, 4)).astype(np.float32)
    mask = np.array([[t < n for t in range(4)] for n in (4, 2, 3, 1, 4, 2)])
    got, targets = estimate(NAME, jnp.asarray(rewards), jnp.asarray(mask), None, LmConfig(**TINY))
    returns = np.where(mask, rewards, 0.0).sum(-1)
    for i in range(6):
        group = returns[3 * (i // 3) : 3 * (i // 3) + 3]
        np.testing.assert_allclose(got[i], np.where(mask[i], returns[i] - sorted(group)[1], 0.0), rtol=1e-6)
    assert targets is None


def test_the_config_derives_its_rules_from_the_entry():
    cfg = validate(LmConfig(**TINY))
    assert not cfg.uses_critic
    inert = cfg.inert_fields()
    for field in ("adv_eps", "gae_lambda", "vf_coef", "critic_lambda"):  # read by other estimators only
        assert inert[field].startswith(f"the advantage estimator {NAME} does not read it (advantage: {NAME}; ")
    with pytest.raises(ConfigError, match="needs group_size >= 2"):
        validate(LmConfig(**{**TINY, "group_size": 1, "num_minibatches": 1}))
    with pytest.raises(ConfigError, match="unknown advantage 'toy_medain'.*Did you mean: toy_median"):
        validate(LmConfig(**{**TINY, "advantage": "toy_medain"}))


def test_a_sweep_of_train_and_a_report_run_it(tmp_path):
    """The sweep's program is the engine's ``train`` (``ppo_jax.lm.train``) vmapped over the 2 x 2 pairs."""
    TRACED.clear()
    spec = {"task": "lm", "name": "outside", "base": TINY, "grid": {"lr": [1e-4, 3e-4]}, "seeds": 2}
    table = sweep.run(spec, out=tmp_path / "sweep")
    assert TRACED and set(TRACED) == {3}  # the engine traced the estimator
    assert json.loads((tmp_path / "sweep" / "spec.json").read_text())["spec"]["base"]["advantage"] == NAME
    assert len(table) == 2 * 2 * TINY["num_updates"] and np.isfinite(table["loss"]).all()

    report = make_report([tmp_path / "sweep"], tmp_path / "report", reps=50)
    record = json.loads((report / "report.json").read_text())
    assert record["task"] == "lm" and record["score"]["metric"] == "accuracy"
