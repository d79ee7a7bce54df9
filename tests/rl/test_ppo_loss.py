"""The total PPO loss on a minibatch and explained variance, against NumPy."""

import jax.numpy as jnp
import numpy as np

from ppo_jax.rl.ppo_loss import explained_variance


def test_explained_variance():
    target = np.array([1.0, 2.0, 3.0, 4.0])
    np.testing.assert_allclose(explained_variance(target, target), 1.0)
    np.testing.assert_allclose(explained_variance(np.full(4, target.mean()), target), 0.0, atol=1e-7)
    assert np.isnan(explained_variance(target, np.ones(4)))


def test_total_loss_with_a_state_dependent_tanh_gaussian_matches_numpy():
    # ppo_loss over a minibatch whose new and old policies have a std per sample (Brax PPO's policy):
    # -mean(min(rA, clip(r)A)) + c1 mean(0.5 (V - R)^2) - c2 mean(H), H estimated at the stored noise.
    from ppo_jax import PPOConfig
    from ppo_jax.distributions import TanhGaussian
    from ppo_jax.rl.ppo_loss import LossCoefficients, Minibatch, ppo_loss

    rng = np.random.default_rng(3)
    m, a = 16, 2
    loc, old_loc = rng.normal(size=(2, m, a)) * 0.5
    log_std, old_log_std = rng.normal(size=(2, m, a)) * 0.3 - 0.5
    value, old_value, target = rng.normal(size=(3, m))
    noise = rng.normal(size=(m, a))
    action = old_loc + np.exp(old_log_std) * noise

    def gaussian_tanh_logp(mu, ls, u):
        gauss = np.sum(-0.5 * ((u - mu) / np.exp(ls)) ** 2 - ls - 0.5 * np.log(2 * np.pi), axis=-1)
        return gauss - np.sum(np.log(1 - np.tanh(u) ** 2), axis=-1)

    old_log_prob = gaussian_tanh_logp(old_loc, old_log_std, action)
    advantage = rng.normal(size=m)
    norm_adv = (advantage - advantage.mean()) / (advantage.std() + 1e-8)
    ratio = np.exp(gaussian_tanh_logp(loc, log_std, action) - old_log_prob)
    policy = -np.mean(np.minimum(ratio * norm_adv, np.clip(ratio, 0.8, 1.2) * norm_adv))
    u = loc + np.exp(log_std) * noise
    # H(tanh u) = H(u) + E log |d tanh u / du|, one sample: u = loc + std * noise
    entropy = np.mean(np.sum(log_std + 0.5 * np.log(2 * np.pi * np.e) + np.log(1 - np.tanh(u) ** 2), axis=-1))
    expected = policy + 0.5 * np.mean(0.5 * (value - target) ** 2) - 0.01 * entropy

    f32 = lambda x: jnp.asarray(x, jnp.float32)  # noqa: E731
    batch = Minibatch(
        obs=jnp.zeros((m, 1)),
        action=f32(action),
        log_prob=f32(old_log_prob),
        value=f32(old_value),
        advantage=f32(advantage),
        target=f32(target),
        old_dist=TanhGaussian(f32(old_loc), f32(old_log_std)),
    )
    cfg = PPOConfig(env="Pendulum-v1", clip_vloss=False)
    coefs = LossCoefficients(clip_eps=f32(0.2), ent_coef=f32(0.01), kl_beta=f32(0.0))
    loss, metrics = ppo_loss(None, lambda _, obs: (TanhGaussian(f32(loc), f32(log_std)), f32(value)), batch, cfg, coefs)
    np.testing.assert_allclose(loss, expected, rtol=1e-4)
    np.testing.assert_allclose(metrics["entropy"], entropy, rtol=1e-4)
