"""The shared losses against NumPy: the clipped surrogate (the four gradient regimes of the seed notes), the value loss, and every policy objective's value and gradient."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ppo_jax.losses import clipped_surrogate_loss, policy_loss, value_loss


def surrogate_reference(log_prob, old_log_prob, advantage, eps):
    ratio = np.exp(log_prob - old_log_prob)
    return -np.minimum(ratio * advantage, np.clip(ratio, 1 - eps, 1 + eps) * advantage)


def test_clipped_surrogate_matches_numpy():
    rng = np.random.default_rng(1)
    log_prob, old_log_prob = rng.normal(size=(2, 64)) * 0.5
    advantage = rng.normal(size=64)
    loss = jax.jit(clipped_surrogate_loss)(log_prob, old_log_prob, advantage, clip_eps=np.float32(0.2))
    assert loss.shape == (64,)
    np.testing.assert_allclose(loss, surrogate_reference(log_prob, old_log_prob, advantage, 0.2), rtol=1e-5, atol=1e-6)


def objective_grad(ratio, advantage, eps=0.2):
    """d(objective)/d(log pi) at a given ratio, objective = -loss."""
    old_log_prob = 0.0

    def objective(log_prob):
        return -clipped_surrogate_loss(log_prob, old_log_prob, advantage, clip_eps=eps)

    return float(jax.grad(objective)(jnp.log(ratio)))


@pytest.mark.parametrize(
    "ratio,advantage,expected",
    [
        # A > 0 and r > 1 + eps: the objective is capped at (1 + eps) A, no gradient.
        (1.5, 2.0, 0.0),
        # A < 0 and r < 1 - eps: capped at (1 - eps) A, no gradient.
        (0.5, -2.0, 0.0),
        # Inside [1 - eps, 1 + eps]: d(r A)/d log pi = r A.
        (1.1, 2.0, 1.1 * 2.0),
        (0.9, -3.0, 0.9 * -3.0),
        # A > 0 with r < 1 - eps: min picks the unclipped (smaller) r A, whose gradient is r A.
        (0.5, 2.0, 0.5 * 2.0),
        # A < 0 with r > 1 + eps: min picks the unclipped (more negative) r A.
        (1.5, -2.0, 1.5 * -2.0),
    ],
)
def test_clipped_surrogate_gradient_regimes(ratio, advantage, expected):
    np.testing.assert_allclose(objective_grad(ratio, advantage), expected, rtol=1e-5, atol=1e-7)


def test_value_loss_clipping_takes_the_pessimistic_max():
    # old value 1, target 3, eps 0.2. New value 2: unclipped 0.5*(2-3)^2 = 0.5;
    # clipped value 1.2 -> 0.5*(1.2-3)^2 = 1.62; max = 1.62.
    np.testing.assert_allclose(value_loss(2.0, 1.0, 3.0, vf_clip_eps=0.2, clip=True), 1.62, rtol=1e-6)
    np.testing.assert_allclose(value_loss(2.0, 1.0, 3.0, vf_clip_eps=0.2, clip=False), 0.5, rtol=1e-6)
    # New value 1.1 within the clip range: both terms equal 0.5*1.9^2.
    np.testing.assert_allclose(value_loss(1.1, 1.0, 3.0, vf_clip_eps=0.2, clip=True), 0.5 * 1.9**2, rtol=1e-6)


# ----- the policy objectives (ppo_jax.losses.policy_loss) -----

EPS, BETA, C = 0.2, 0.7, 3.0


def reference_objective(name, ratio, adv, kl):
    """The objectives as written in the papers (float64), maximised."""
    clipped = np.clip(ratio, 1 - EPS, 1 + EPS) * adv
    if name == "clip":
        return min(ratio * adv, clipped)
    if name == "clip_no_min":
        return clipped
    if name == "unclipped":
        return ratio * adv
    if name in ("kl_fixed", "kl_adaptive"):
        return ratio * adv - BETA * kl
    if name == "dual_clip":
        standard = min(ratio * adv, clipped)
        return max(standard, C * adv) if adv < 0 else standard
    raise ValueError(name)


def jax_objective(name, log_prob, adv, kl):
    return -policy_loss(name, log_prob, 0.0, adv, kl, clip_eps=EPS, kl_beta=BETA, dual_clip_c=C)


OBJECTIVES = ["clip", "clip_no_min", "unclipped", "kl_fixed", "kl_adaptive", "dual_clip"]


RATIOS = [0.5, 0.9, 1.0, 1.1, 1.5, 4.0]


ADVANTAGES = [2.0, -1.0]


@pytest.mark.parametrize("name,ratio,adv", list(itertools.product(OBJECTIVES, RATIOS, ADVANTAGES)))
def test_objective_value_and_gradient_match_numpy(name, ratio, adv):
    kl = 0.3
    value = jax_objective(name, jnp.log(ratio), adv, kl)
    np.testing.assert_allclose(value, reference_objective(name, ratio, adv, kl), rtol=1e-5)

    # d objective / d log pi by central differences on the NumPy reference (no kinks at these points).
    h = 1e-6
    numeric = (
        reference_objective(name, np.exp(np.log(ratio) + h), adv, kl)
        - reference_objective(name, np.exp(np.log(ratio) - h), adv, kl)
    ) / (2 * h)
    grad = jax.grad(jax_objective, argnums=1)(name, jnp.log(ratio), adv, kl)
    np.testing.assert_allclose(grad, numeric, rtol=1e-3, atol=1e-6)

    # d objective / d KL: -beta for the KL objectives, 0 otherwise.
    grad_kl = jax.grad(jax_objective, argnums=3)(name, jnp.log(ratio), adv, kl)
    np.testing.assert_allclose(grad_kl, -BETA if name.startswith("kl") else 0.0, atol=1e-7)


def test_named_regimes():
    # clip_no_min lets A > 0 with r < 1 - eps go flat (no gradient), unlike clip (min keeps r A).
    assert jax.grad(jax_objective, argnums=1)("clip_no_min", jnp.log(0.5), 2.0, 0.0) == 0.0
    assert jax.grad(jax_objective, argnums=1)("clip", jnp.log(0.5), 2.0, 0.0) == pytest.approx(1.0)
    # dual clip: A < 0 and r = 4: clip gives r A = -4 (gradient r A); dual clip caps at c A = -3 (no gradient).
    assert jax_objective("dual_clip", jnp.log(4.0), -1.0, 0.0) == pytest.approx(-3.0)
    assert jax.grad(jax_objective, argnums=1)("dual_clip", jnp.log(4.0), -1.0, 0.0) == 0.0
    assert jax.grad(jax_objective, argnums=1)("clip", jnp.log(4.0), -1.0, 0.0) == pytest.approx(-4.0)
