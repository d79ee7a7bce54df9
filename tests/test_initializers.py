"""The QR-free orthogonal init against NumPy's QR."""

import jax
import numpy as np
import pytest

from ppo_jax.initializers import gram_schmidt, orthogonal


def test_gram_schmidt_equals_numpy_qr_with_positive_diagonal():
    a = np.random.default_rng(0).normal(size=(64, 48)).astype(np.float32)
    q_ref, r_ref = np.linalg.qr(a.astype(np.float64))
    q_ref = q_ref * np.sign(np.diag(r_ref))  # the unique Q whose R has a positive diagonal
    np.testing.assert_allclose(jax.jit(gram_schmidt)(a), q_ref, atol=2e-5)


@pytest.mark.parametrize("shape", [(4, 64), (64, 64), (64, 2), (64, 1), (128, 256)])
def test_orthogonal_initializer(shape):
    w = np.asarray(orthogonal(2.0)(jax.random.key(1), shape), np.float64)
    assert w.shape == shape
    small = min(shape)
    gram = w.T @ w if shape[0] >= shape[1] else w @ w.T
    np.testing.assert_allclose(gram, 4.0 * np.eye(small), atol=5e-5)
