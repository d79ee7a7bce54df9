"""``scan_updates`` adds ``non_finite`` to every engine's metrics: 1.0 after an update whose loss or checked state
is NaN or infinite, else 0.0; checked on toy steps whose divergence is known by construction."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ppo_jax.final_values import NON_FINITE, NON_FINITE_LOSS, NON_FINITE_STATE, divergence_reason, first_divergence
from ppo_jax.scan_updates import scan_updates


def run(step, carry, num=6, **kwargs):
    out = jax.jit(lambda c: scan_updates(step, c, 0, num, num_updates=num, **kwargs))(carry)
    return jax.device_get(out)


def test_a_non_finite_parameter_flags_its_update_and_every_later_one():
    # The "parameter" w becomes NaN in update 3 and stays NaN; the loss stays finite: the state is the reason.
    def step(carry, u):
        w = jnp.where(u == 3, jnp.nan, carry["w"] + 1.0)
        return {**carry, "w": w, "n": carry["n"] + 1}, {"loss": jnp.float32(2.0), "w": w}

    carry, metrics = run(step, {"w": jnp.float32(0.0), "n": jnp.int32(0), "key": jax.random.key(0)})
    np.testing.assert_array_equal(metrics[NON_FINITE], [0, 0, 0, 1, 1, 1])
    assert metrics[NON_FINITE].dtype == np.float32
    np.testing.assert_array_equal(metrics["w"], [1, 2, 3, np.nan, np.nan, np.nan])  # the step's metrics untouched
    first = int(first_divergence(metrics[NON_FINITE]))
    assert first == 3 and divergence_reason(metrics["loss"][first]) == NON_FINITE_STATE


def test_a_non_finite_loss_flags_its_update_with_a_finite_state():
    def step(carry, u):
        return carry, {"loss": jnp.where(u == 2, jnp.inf, 1.0)}

    _, metrics = run(step, {"w": jnp.ones(3)})
    np.testing.assert_array_equal(metrics[NON_FINITE], [0, 0, 1, 0, 0, 0])
    assert first_divergence(metrics[NON_FINITE]) == 2 and divergence_reason(metrics["loss"][2]) == NON_FINITE_LOSS


def test_checked_leaves_out_state_that_is_nan_by_design_and_masked_updates_report_nan():
    # "last" is NaN until something happens (PPO's last episode return): only `checked` tells it from divergence.
    def step(carry, u):
        return carry, {"loss": jnp.float32(0.0)}

    carry = {"w": jnp.zeros(2), "last": jnp.full(2, jnp.nan)}
    assert (run(step, carry)[1][NON_FINITE] == 1).all()
    assert (run(step, carry, checked=lambda c: c["w"])[1][NON_FINITE] == 0).all()
    # updates 4 .. 7 of a run of 6: the last two are past its end, skipped, NaN like every float metric there
    out = jax.jit(lambda c: scan_updates(step, c, 4, 4, num_updates=6, masked=True, checked=lambda c: c["w"]))(carry)
    np.testing.assert_array_equal(jax.device_get(out[1])[NON_FINITE], [0, 0, np.nan, np.nan])


def test_under_vmap_each_run_is_flagged_on_its_own():
    def step(carry, u):
        w = jnp.where(u >= carry["k"], jnp.nan, carry["w"])
        return {**carry, "w": w}, {"loss": jnp.float32(0.0)}

    def one(k):
        return scan_updates(step, {"w": jnp.float32(1.0), "k": k}, 0, 5, num_updates=5)[1][NON_FINITE]

    flags = jax.device_get(jax.jit(jax.vmap(one))(jnp.array([1, 9, 4])))
    np.testing.assert_array_equal(first_divergence(flags), [1, -1, 4])
