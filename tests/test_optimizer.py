"""The optimizer (global-norm clip + Adam, injected hyperparameters) against a NumPy loop."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ppo_jax.optimizer import create_train_state, set_hyperparams


class _Cfg:
    lr, max_grad_norm, adam_eps = 1e-2, 0.5, 1e-5


def numpy_clip_adam(params, grads_seq, lr, max_norm, eps, b1=0.9, b2=0.999):
    """Kingma & Ba (2015), Algorithm 1, after scaling the gradient to global norm <= max_norm (Pascanu et al. 2013)."""
    params = {k: v.astype(np.float64) for k, v in params.items()}
    m = {k: np.zeros_like(v) for k, v in params.items()}
    v = {k: np.zeros_like(p) for k, p in params.items()}
    for t, grads in enumerate(grads_seq, start=1):
        norm = np.sqrt(sum(np.sum(g.astype(np.float64) ** 2) for g in grads.values()))
        scale = min(1.0, max_norm / norm) if np.isfinite(max_norm) else 1.0
        for k, g in grads.items():
            g = g.astype(np.float64) * scale
            m[k] = b1 * m[k] + (1 - b1) * g
            v[k] = b2 * v[k] + (1 - b2) * g**2
            m_hat, v_hat = m[k] / (1 - b1**t), v[k] / (1 - b2**t)
            params[k] = params[k] - lr * m_hat / (np.sqrt(v_hat) + eps)
    return params


@pytest.mark.parametrize("max_norm", [0.5, np.inf])
def test_clip_and_adam_match_numpy(max_norm):
    rng = np.random.default_rng(0)
    params = {
        "w": rng.normal(size=(7, 5)).astype(np.float32),
        "b": rng.normal(size=5).astype(np.float32),
        "log_std": np.zeros(2, np.float32),
    }
    # Gradients of varied scale, so the clip is active on some steps and not on others.
    grads_seq = [
        {k: (rng.normal(size=p.shape) * s).astype(np.float32) for k, p in params.items()}
        for s in (2.0, 0.01, 1.0, 0.05)
    ]
    cfg = _Cfg()
    cfg.max_grad_norm = max_norm
    state = create_train_state(None, jax.tree.map(jnp.asarray, params), cfg)
    state = set_hyperparams(state, learning_rate=3e-3)  # a schedule's later value overrides the config's
    step = jax.jit(lambda s, g: s.apply_gradients(grads=g))
    for grads in grads_seq:
        state = step(state, jax.tree.map(jnp.asarray, grads))
    expected = numpy_clip_adam(params, grads_seq, 3e-3, max_norm, cfg.adam_eps)
    for k in params:
        np.testing.assert_allclose(state.params[k], expected[k], rtol=1e-5, atol=1e-6, err_msg=k)
