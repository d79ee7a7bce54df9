"""Networks: QR-free orthogonal init against NumPy's QR, head scales, and no LAPACK QR in the program."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ppo_jax import PPOConfig
from ppo_jax.rl.networks import ActorCritic
from ppo_jax.rl.train import train


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


def test_state_dependent_std_is_softplus_of_the_head_plus_min_std():
    # Brax PPO's NormalTanhDistribution: the head's second half x gives std = softplus(x) + 0.001.
    net = ActorCritic(action_dim=2, discrete=False, squash=True, state_dependent_std=True, hidden_sizes=(8,))
    params = net.init(jax.random.key(0), jnp.zeros((3,)))
    assert "log_std" not in params["params"] and params["params"]["policy_head"]["kernel"].shape == (8, 4)
    obs = np.random.default_rng(1).normal(size=(5, 3)).astype(np.float32)
    dist, _ = net.apply(params, obs)
    p = jax.tree.map(np.asarray, params["params"])
    hidden = np.tanh(obs @ p["actor_torso"]["Dense_0"]["kernel"] + p["actor_torso"]["Dense_0"]["bias"])
    head = hidden @ p["policy_head"]["kernel"] + p["policy_head"]["bias"]
    np.testing.assert_allclose(dist.loc, head[:, :2], rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(np.exp(dist.log_std), np.log1p(np.exp(head[:, 2:])) + 1e-3, rtol=1e-5)
    assert dist.log_std.shape == (5, 2) and np.ptp(np.asarray(dist.log_std), axis=0).min() > 0  # varies with the state


def test_lecun_uniform_init_on_every_kernel():
    # U(-b, b) with b = sqrt(3 / fan_in): variance 1 / fan_in, heads included (no 0.01 / 1.0 gains).
    net = ActorCritic(action_dim=1, discrete=False, hidden_sizes=(256, 256), kernel_init="lecun_uniform")
    p = net.init(jax.random.key(0), jnp.zeros((17,)))["params"]
    for kernel in (
        p["actor_torso"]["Dense_0"]["kernel"],
        p["actor_torso"]["Dense_1"]["kernel"],
        p["policy_head"]["kernel"],
        p["value_head"]["kernel"],
    ):
        bound = np.sqrt(3.0 / kernel.shape[0])
        assert np.abs(kernel).max() <= bound and np.abs(kernel).max() > 0.9 * bound
        np.testing.assert_allclose(np.var(np.asarray(kernel)), 1.0 / kernel.shape[0], rtol=0.35)


def test_state_dependent_std_trains_and_is_refused_on_discrete_actions():
    from ppo_jax.errors import ConfigError
    from ppo_jax.rl.train import check

    cfg = PPOConfig(
        env="Pendulum-v1",
        policy_std="state",
        kernel_init="lecun_uniform",
        action_dist="tanh_gaussian",
        total_timesteps=256,
        num_envs=2,
        num_steps=64,
    )
    out = jax.jit(train)(cfg, jax.random.key(0))
    assert np.isfinite(np.asarray(out.metrics["loss"])).all() and np.asarray(out.metrics["entropy"]).std() > 0
    with pytest.raises(ConfigError, match="policy_std state .* CartPole-v1 has discrete actions"):
        check(PPOConfig(policy_std="state"))


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


def test_head_hidden_layers_sit_between_the_shared_torso_and_each_head():
    # PureJaxRL ppo_rnn.py's shape: a shared torso, then a relu layer of each head's own, then the output layer.
    net = ActorCritic(
        action_dim=2, discrete=True, hidden_sizes=(6,), activation="relu", shared_torso=True, head_hidden_sizes=(5,)
    )
    params = net.init(jax.random.key(0), jnp.zeros((3,)))
    p = jax.tree.map(np.asarray, params["params"])
    assert set(p) == {"torso", "policy_head_torso", "value_head_torso", "policy_head", "value_head"}
    obs = np.random.default_rng(0).normal(size=(4, 3)).astype(np.float32)

    def dense(x, layer):
        return x @ layer["kernel"] + layer["bias"]

    torso = np.maximum(dense(obs, p["torso"]["Dense_0"]), 0)
    logits = dense(np.maximum(dense(torso, p["policy_head_torso"]["Dense_0"]), 0), p["policy_head"])
    value = dense(np.maximum(dense(torso, p["value_head_torso"]["Dense_0"]), 0), p["value_head"])[:, 0]
    dist, v = net.apply(params, obs)
    np.testing.assert_allclose(dist.loc, logits, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(v, value, rtol=1e-5, atol=1e-6)
    assert not np.allclose(p["policy_head_torso"]["Dense_0"]["kernel"], p["value_head_torso"]["Dense_0"]["kernel"])
