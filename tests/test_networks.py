"""Networks: QR-free orthogonal init against NumPy's QR, head scales, and no LAPACK QR in the program."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ppo_jax import PPOConfig
from ppo_jax.networks import ActorCritic, gram_schmidt, orthogonal
from ppo_jax.train import train


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


def test_actor_critic_shapes_and_head_scales():
    net = ActorCritic(action_dim=3, discrete=True)
    params = net.init(jax.random.key(0), jnp.zeros((5,)))
    dist, value = net.apply(params, jnp.ones((7, 5)))
    assert dist.loc.shape == (7, 3) and value.shape == (7,) and dist.log_std is None
    p = params["params"]
    # Columns of an orthogonal [64, 3] kernel scaled by 0.01 have norm 0.01.
    np.testing.assert_allclose(np.linalg.norm(p["policy_head"]["kernel"], axis=0), 0.01, rtol=1e-4)
    np.testing.assert_allclose(np.linalg.norm(p["value_head"]["kernel"], axis=0), 1.0, rtol=1e-4)
    assert set(p) == {"actor_torso", "critic_torso", "policy_head", "value_head"}

    cont = ActorCritic(action_dim=2, discrete=False, shared_torso=True)
    params = cont.init(jax.random.key(0), jnp.zeros((3,)))
    dist, value = cont.apply(params, jnp.ones((4, 3)))
    assert dist.loc.shape == (4, 2) and dist.log_std.shape == (2,) and value.shape == (4,)
    assert "torso" in params["params"] and "actor_torso" not in params["params"]


def _has_lapack_qr(text: str) -> bool:
    return "geqrf" in text.lower()


def test_vmapped_train_holds_no_batched_qr():
    # Guards against the hang seen with jaxlib 0.10.2 on 2 CPU cores: a program holding two
    # independent batched LAPACK QRs (orthogonal init under vmap over seeds) never returned.
    # Our init is QR-free, so vmapped training cannot contain such a call.
    positive_control = jax.jit(jax.vmap(lambda x: jnp.linalg.qr(x)[0])).lower(jnp.ones((2, 4, 4))).as_text()
    assert _has_lapack_qr(positive_control)

    cfg = PPOConfig(total_timesteps=512, num_envs=2, num_steps=64, num_minibatches=2, update_epochs=1)
    keys = jax.random.split(jax.random.key(0), 4)
    text = jax.jit(jax.vmap(train, in_axes=(None, 0))).lower(cfg, keys).as_text()
    assert not _has_lapack_qr(text)
