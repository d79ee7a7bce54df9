"""minibatch_epochs against a NumPy float64 loop: the same shuffles, one gradient step per minibatch, the averaged
metrics; and the stop path (which steps are skipped, what update_fraction is), worked out by hand.

The model is linear least squares plus a "counter" parameter c with loss term -c: its gradient is -1 at every
step, so plain SGD with learning rate LR adds exactly LR to c per step taken, and the metric c / LR is the number
of steps taken so far (exact in float32: LR is a power of two).
"""

from __future__ import annotations

import types

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax.training.train_state import TrainState

from ppo_jax.minibatch_epochs import minibatch_epochs
from ppo_jax.optimizer import create_train_state

N, M, E, D = 12, 3, 2, 3  # rows, minibatches per epoch, epochs, features
MB = N // M
STEPS = E * M  # 6 minibatch steps per call
LR = 1.0 / 16
KEY = jax.random.key(11)
INIT = {"w": np.array([0.2, 0.1, -0.3]), "b": np.array(0.5), "c": np.array(0.0)}


def make_batch():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(N, D))
    y = x @ np.array([1.0, -2.0, 0.5]) + 0.3 + 0.1 * rng.normal(size=N)
    return {"x": x.astype(np.float32), "y": y.astype(np.float32), "id": np.arange(N, dtype=np.int32)}


def make_loss(target_row: int = -1):
    def loss_fn(params, minibatch):
        residual = minibatch["x"] @ params["w"] + params["b"] - minibatch["y"]
        mse = jnp.mean(residual**2)
        has_row = jnp.any(minibatch["id"] == target_row).astype(jnp.float32)
        return mse - params["c"], {"mse": mse, "counter": params["c"] / LR, "has_row": has_row}

    return loss_fn


def permutations() -> list[np.ndarray]:
    """The input shuffles, drawn as the function documents: one permutation of the N rows per epoch key."""
    return [np.asarray(jax.random.permutation(k, N)) for k in jax.random.split(KEY, E)]


# ----------------------------------------------------------------------------- the NumPy reference


def np_loss_metrics_grads(params, x, y, ids, target_row):
    residual = x @ params["w"] + params["b"] - y
    mse = np.mean(residual**2)
    grads = {"w": 2.0 * x.T @ residual / len(y), "b": np.array(2.0 * residual.mean()), "c": np.array(-1.0)}
    metrics = {"mse": mse, "counter": params["c"] / LR, "has_row": float(target_row in ids)}
    return mse - params["c"], metrics, grads


def clipped(grads, norm, max_norm):
    """optax.clip_by_global_norm: unchanged below max_norm, else rescaled to norm max_norm."""
    scale = 1.0 if norm < max_norm else max_norm / norm
    return {k: g * scale for k, g in grads.items()}


def sgd(max_norm=np.inf):
    def step(params, state, grads, norm):
        return {k: params[k] - LR * g for k, g in clipped(grads, norm, max_norm).items()}, state

    return step, None


def clip_adam(lr, max_norm, eps, b1=0.9, b2=0.999):
    """ppo_jax.optimizer: global-norm clip, then Adam (Kingma & Ba 2015, bias-corrected, eps outside the sqrt)."""

    def step(params, state, grads, norm):
        m, v, t = state
        g = clipped(grads, norm, max_norm)
        t += 1
        m = {k: b1 * m[k] + (1 - b1) * g[k] for k in g}
        v = {k: b2 * v[k] + (1 - b2) * g[k] ** 2 for k in g}
        new = {k: params[k] - lr * (m[k] / (1 - b1**t)) / (np.sqrt(v[k] / (1 - b2**t)) + eps) for k in g}
        return new, (m, v, t)

    zeros = {k: np.zeros_like(p) for k, p in INIT.items()}
    return step, (zeros, zeros, 0)


def reference(batch, perms, optimizer, stop=None, target_row=-1):
    """One step per minibatch of each epoch's permutation; once ``stop`` is true the step and all later ones are
    skipped (their metrics still recorded, at the frozen parameters). Returns (params, mean metrics, per step)."""
    step, state = optimizer
    params = {k: np.asarray(v, np.float64) for k, v in INIT.items()}
    x, y, ids = np.asarray(batch["x"], np.float64), np.asarray(batch["y"], np.float64), batch["id"]
    history, stopped = [], False
    for perm in perms:
        for j in range(M):
            rows = perm[j * MB : (j + 1) * MB]
            loss, metrics, grads = np_loss_metrics_grads(params, x[rows], y[rows], ids[rows], target_row)
            norm = np.sqrt(sum(np.sum(g**2) for g in grads.values()))
            metrics = {**metrics, "loss": loss, "grad_norm": norm}
            stopped = stopped or bool(stop is not None and stop(metrics))
            if not stopped:
                params, state = step(params, state, grads, norm)
            metrics["update_fraction"] = 0.0 if stopped else 1.0
            history.append(metrics)
    means = {k: np.mean([h[k] for h in history]) for k in history[0]}
    return params, means, history


def run(train_state, batch, stop=None, target_row=-1):
    fn = jax.jit(
        lambda ts, b: minibatch_epochs(ts, b, make_loss(target_row), KEY, num_minibatches=M, update_epochs=E, stop=stop)
    )
    return jax.device_get(fn(train_state, batch))


def initial_params():
    return {k: jnp.asarray(v, jnp.float32) for k, v in INIT.items()}


def assert_matches(params, metrics, expected_params, expected_metrics, atol=1e-6):
    for name, value in expected_params.items():
        np.testing.assert_allclose(params[name], value, rtol=2e-5, atol=atol, err_msg=name)
    assert set(metrics) == set(expected_metrics)
    for name, value in expected_metrics.items():
        np.testing.assert_allclose(metrics[name], value, rtol=2e-5, atol=1e-6, err_msg=name)


# ----------------------------------------------------------------------------- tests


def test_the_shuffles_are_real():
    # Otherwise a loop that ignores the key (or reuses one permutation for every epoch) would pass the tests below.
    first, second = permutations()
    assert sorted(first) == sorted(second) == list(range(N))
    assert not np.array_equal(first, np.arange(N)) and not np.array_equal(first, second)


@pytest.mark.parametrize("optimizer", ["sgd_clip", "project_adam"])
def test_matches_a_numpy_loop(optimizer):
    batch = make_batch()
    perms = permutations()
    if optimizer == "sgd_clip":  # max_norm between the steps' gradient norms: some steps are clipped, some not
        max_norm = 2.0
        tx_state = TrainState.create(
            apply_fn=None, params=initial_params(), tx=optax.chain(optax.clip_by_global_norm(max_norm), optax.sgd(LR))
        )
        np_optimizer = sgd(max_norm)
    else:  # the project's optimizer, hyperparameters injected as every task does
        max_norm = 2.0
        cfg = types.SimpleNamespace(lr=0.05, max_grad_norm=max_norm, adam_eps=1e-5)
        tx_state = create_train_state(None, initial_params(), cfg)
        np_optimizer = clip_adam(0.05, max_norm, 1e-5)
    expected_params, expected_metrics, history = reference(batch, perms, np_optimizer)
    norms = [h["grad_norm"] for h in history]
    assert min(norms) < max_norm < max(norms), norms  # the pre-clip norm is reported, and clipping is exercised
    # The shuffle matters: the same steps in another order end elsewhere.
    other, _, _ = reference(batch, [perms[1], perms[0]], np_optimizer)
    assert np.abs(other["w"] - expected_params["w"]).max() > 1e-3

    new_state, metrics = run(tx_state, batch)
    assert expected_metrics["update_fraction"] == 1.0
    # Adam in float32 is good to ~2e-6 here: 1 - b2**t, the bias correction, loses digits to cancellation (b2 = 0.999).
    # One step more or less, or another order, moves the parameters by > 1e-3.
    assert_matches(
        new_state.params, metrics, expected_params, expected_metrics, atol=1e-5 if optimizer == "project_adam" else 1e-6
    )
    assert int(new_state.step) == STEPS


@pytest.mark.parametrize("k", [0, 2, 4, 6])
def test_stop_at_step_k_keeps_the_first_k_steps(k):
    # stop(metrics) is evaluated on step s's metrics, computed at the parameters before step s; the counter
    # metric is then the number of steps taken so far, s. So "counter >= k" first fires at step s = k: that step
    # and every later one are skipped, steps 0..k-1 are kept (all six when k = 6: it never fires).
    #   parameters: those after k steps; c = k * LR; train_state.step = k
    #   update_fraction = k / 6
    #   mean counter = (0 + 1 + ... + (k-1) + (6 - k) * k) / 6   (frozen at k for the skipped steps):
    #     k=0: 0;  k=2: (1 + 4*2)/6 = 1.5;  k=4: (6 + 2*4)/6 = 14/6;  k=6: 15/6
    # The other metrics of skipped steps are still averaged in, evaluated at the frozen parameters.
    hand_counter = {0: 0.0, 2: 1.5, 4: 14 / 6, 6: 15 / 6}[k]
    batch = make_batch()

    def stop(m):
        return m["counter"] >= k

    state = TrainState.create(apply_fn=None, params=initial_params(), tx=optax.sgd(LR))
    new_state, metrics = run(state, batch, stop=stop)

    assert metrics["update_fraction"] == pytest.approx(k / STEPS, abs=1e-7)
    assert metrics["counter"] == pytest.approx(hand_counter, abs=1e-6)
    assert float(new_state.params["c"]) == k * LR and int(new_state.step) == k
    if k == 0:  # nothing taken: the initial parameters, bit for bit
        for name, value in initial_params().items():
            np.testing.assert_array_equal(new_state.params[name], value)
    expected_params, expected_metrics, _ = reference(batch, permutations(), sgd(), stop=stop)
    assert_matches(new_state.params, metrics, expected_params, expected_metrics)


def test_a_stop_holds_for_the_rest_of_the_call():
    # Fire once, at step 4 only: stop = counter >= 3 and the minibatch holds row r, r a row of epoch 1's
    # minibatch 1 (step 4 = epoch 1 x 3 + 1). Row r is in one minibatch of epoch 0 too, but there the counter is
    # at most 2; at step 5 the minibatch lacks r, so stop(metrics) is false there, yet the step stays skipped.
    # Steps 0..3 taken: update_fraction = 4/6 (5/6 if the stop did not hold), c = 4 * LR, step = 4.
    perms = permutations()
    target_row = int(perms[1][MB])
    batch = make_batch()

    def stop(m):
        return (m["counter"] >= 3) & (m["has_row"] > 0)

    state = TrainState.create(apply_fn=None, params=initial_params(), tx=optax.sgd(LR))
    new_state, metrics = run(state, batch, stop=stop, target_row=target_row)

    assert metrics["update_fraction"] == pytest.approx(4 / 6)
    assert float(new_state.params["c"]) == 4 * LR and int(new_state.step) == 4
    assert metrics["counter"] == pytest.approx((0 + 1 + 2 + 3 + 4 + 4) / 6)
    expected_params, expected_metrics, _ = reference(batch, perms, sgd(), stop=stop, target_row=target_row)
    assert_matches(new_state.params, metrics, expected_params, expected_metrics)


# ----------------------------------------------------------------------------- micro-batches (gradient accumulation)


@pytest.mark.parametrize("micro_batches", [2, 4])
def test_micro_batches_of_a_row_mean_take_the_minibatch_step(micro_batches):
    # The loss is a mean over rows, so the mean of the micro-batches' gradients is the minibatch's: the same
    # steps as the NumPy loop over whole minibatches (clipping exercised, as in test_matches_a_numpy_loop).
    batch, max_norm = make_batch(), 2.0
    tx = optax.chain(optax.clip_by_global_norm(max_norm), optax.sgd(LR))
    state = TrainState.create(apply_fn=None, params=initial_params(), tx=tx)
    fn = jax.jit(
        lambda ts, b: minibatch_epochs(
            ts, b, make_loss(), KEY, num_minibatches=M, update_epochs=E, micro_batches=micro_batches
        )
    )
    new_state, metrics = jax.device_get(fn(state, batch))
    expected_params, expected_metrics, _ = reference(batch, permutations(), sgd(max_norm))
    assert_matches(new_state.params, metrics, expected_params, expected_metrics)


WEIGHTS = np.array([3.0, 0.0, 1.0, 5.0, 2.0, 0.0, 4.0, 1.0, 1.0, 6.0, 2.0, 3.0], np.float32)  # as token counts


def weighted_reference(batch, perms):
    """SGD on sum_i w_i r_i^2 / sum_i w_i over each minibatch (a token mean: w_i a row's tokens), float64."""
    params = {k: np.asarray(v, np.float64) for k, v in INIT.items()}
    x, y = np.asarray(batch["x"], np.float64), np.asarray(batch["y"], np.float64)
    for perm in perms:
        for j in range(M):
            rows = perm[j * MB : (j + 1) * MB]
            w = WEIGHTS[rows].astype(np.float64)
            residual = x[rows] @ params["w"] + params["b"] - y[rows]
            params["w"] = params["w"] - LR * 2.0 * x[rows].T @ (w * residual) / w.sum()
            params["b"] = params["b"] - LR * 2.0 * (w * residual).sum() / w.sum()
    return params


def test_totals_make_a_token_mean_exact_over_micro_batches():
    # Rows of unequal weight (token counts): a mean of the micro-batches' own weighted means is not the
    # minibatch's; with ``totals`` (the minibatch's weight sum) each micro-batch returns m x its share, exactly.
    batch = {**make_batch(), "weight": WEIGHTS}
    m = 2

    def share(params, micro, total):
        residual = micro["x"] @ params["w"] + params["b"] - micro["y"]
        return m * jnp.sum(micro["weight"] * residual**2) / total, {}

    def own_mean(params, micro):
        residual = micro["x"] @ params["w"] + params["b"] - micro["y"]
        return jnp.sum(micro["weight"] * residual**2) / jnp.sum(micro["weight"]), {}

    state = TrainState.create(apply_fn=None, params=initial_params(), tx=optax.sgd(LR))
    common = dict(num_minibatches=M, update_epochs=E, micro_batches=m)
    exact, _ = jax.jit(
        lambda ts, b: minibatch_epochs(ts, b, share, KEY, totals=lambda mb: mb["weight"].sum(), **common)
    )(state, batch)
    naive, _ = jax.jit(lambda ts, b: minibatch_epochs(ts, b, own_mean, KEY, **common))(state, batch)
    expected = weighted_reference(batch, permutations())
    for name in ("w", "b"):
        np.testing.assert_allclose(exact.params[name], expected[name], rtol=2e-5, atol=1e-6, err_msg=name)
    assert np.abs(np.asarray(naive.params["w"]) - expected["w"]).max() > 1e-3  # the test can tell them apart


def test_micro_batches_must_divide_the_minibatch():
    state = TrainState.create(apply_fn=None, params=initial_params(), tx=optax.sgd(LR))
    with pytest.raises(ValueError, match="micro_batches 3 does not divide the minibatch of 4 rows"):
        minibatch_epochs(state, make_batch(), make_loss(), KEY, num_minibatches=M, update_epochs=E, micro_batches=3)
