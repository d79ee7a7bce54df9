"""The sampler-trainer mismatch corrections (``rollout_is``): weights, masks, metrics and the resulting loss against
NumPy loops; the thresholds' validation and inertness."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import special

from ppo_jax.errors import ConfigError, RelationError
from ppo_jax.lm import tokens
from ppo_jax.lm.config import LmConfig
from ppo_jax.lm.rollout_correction import mismatch_metrics, rollout_weights
from ppo_jax.lm.token_loss import SequenceBatch, loss_from_outputs
from ppo_jax.lm.validation import validate

M, L, P, V = 6, 7, 3, 9
C, LOW = 1.3, 0.8


def random_case(seed: int, spread: float = 0.3):
    """Trainer and sampler log-probs whose ratios fall on both sides of the thresholds, and a ragged mask."""
    rng = np.random.default_rng(seed)
    old = rng.normal(size=(M, L)).astype(np.float32) - 2.0
    sampler = (old + spread * rng.normal(size=(M, L))).astype(np.float32)
    lengths = rng.integers(1, L + 1, size=M)
    lengths[0] = L
    mask = np.arange(L)[None, :] < lengths[:, None]
    return old, sampler, mask


def reference_weights(kind, old, sampler, mask):
    """A slow loop: the weight of every token of the policy term (0 on a dropped response, 1 off the mask)."""
    weight = np.ones(old.shape, np.float64)
    truncated = np.zeros(old.shape, bool)
    for i in range(old.shape[0]):
        if kind == "token":
            for t in range(old.shape[1]):
                if mask[i, t]:
                    rho = np.exp(np.float64(old[i, t]) - np.float64(sampler[i, t]))
                    weight[i, t] = min(rho, C)
                    truncated[i, t] = rho > C
        elif kind == "sequence":
            rho = 1.0
            for t in range(old.shape[1]):
                if mask[i, t]:
                    rho *= np.exp(np.float64(old[i, t]) - np.float64(sampler[i, t]))
            for t in range(old.shape[1]):
                if mask[i, t]:
                    weight[i, t] = rho if LOW <= rho <= C else 0.0
    return weight, truncated


@pytest.mark.parametrize("kind", ["token", "sequence"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_weights_match_a_numpy_loop(kind, seed):
    old, sampler, mask = random_case(seed)
    out = jax.jit(rollout_weights, static_argnums=0)(kind, old, sampler, mask, threshold=C, threshold_low=LOW)
    weight, truncated = reference_weights(kind, old, sampler, mask)
    np.testing.assert_allclose(out.weight, weight, rtol=2e-5)
    np.testing.assert_array_equal(out.truncated, truncated)
    np.testing.assert_array_equal(out.kept, mask & ((weight > 0) | (kind == "token")))
    if kind == "token":  # the case exercises both sides of the threshold
        assert truncated.any() and (mask & ~truncated).any()
    else:
        assert (weight[mask] == 0).any() and (weight[mask] > 0).any()


def test_sequence_masking_checks_the_product_ratio_against_both_bounds_by_hand():
    # row 0: ratios 1.2 * 1.2 = 1.44 > C: dropped; row 1: 0.9 * 0.95 = 0.855 in [0.8, 1.3]: kept with weight 0.855;
    # row 2: 0.9 * 0.85 = 0.765 < 0.8: dropped, though each token's ratio is in range; row 3: one token, 1.25: kept.
    ratios = np.array([[1.2, 1.2], [0.9, 0.95], [0.9, 0.85], [1.25, 7.0]])
    mask = np.array([[True, True], [True, True], [True, True], [True, False]])
    old = np.full(ratios.shape, -1.0, np.float32)
    sampler = (old - np.log(ratios)).astype(np.float32)
    out = rollout_weights("sequence", old, sampler, mask, threshold=C, threshold_low=LOW)
    np.testing.assert_allclose(out.weight, [[0, 0], [0.855, 0.855], [0, 0], [1.25, 1.0]], rtol=1e-5)


def test_no_correction_and_matching_samplers_leave_the_weights_at_one():
    old, _, mask = random_case(3)
    for kind in ("none", "token"):
        out = rollout_weights(kind, old, old, mask, threshold=C, threshold_low=LOW)
        np.testing.assert_array_equal(out.weight, 1.0)
        np.testing.assert_array_equal(out.kept, mask)


def test_weights_are_constants():
    old, sampler, mask = random_case(4)
    for kind in ("token", "sequence"):

        def total(old, sampler, kind=kind):
            return rollout_weights(kind, old, sampler, mask, threshold=C, threshold_low=LOW).weight.sum()

        for grad in jax.grad(total, argnums=(0, 1))(old, sampler):
            np.testing.assert_array_equal(grad, 0.0)


def test_metrics_match_numpy():
    old, sampler, mask = random_case(5)
    loss_mask = mask.copy()
    loss_mask[1] = False  # a response dynamic sampling dropped: in the mismatch, not in the correction's shares
    cfg = LmConfig(rollout_is_threshold=C, rollout_is_threshold_low=LOW)
    log_r = old.astype(np.float64) - sampler  # log pi_old - log pi_s
    k1 = np.where(mask, -log_r, 0).sum(-1).mean()
    k3 = np.where(mask, np.expm1(log_r) - log_r, 0).sum(-1).mean()
    for kind in ("none", "token", "sequence"):
        out = mismatch_metrics(kind, old, sampler, mask, loss_mask, cfg)
        np.testing.assert_allclose(out["mismatch_kl"], k1, rtol=1e-5)
        np.testing.assert_allclose(out["mismatch_k3_kl"], k3, rtol=1e-5)
        assert out["mismatch_k3_kl"] > 0
        weight, truncated = reference_weights(kind, old, sampler, loss_mask)
        kept = loss_mask & ((weight > 0) | (kind != "sequence"))
        np.testing.assert_allclose(out["rollout_is_mean"], weight[kept].mean(), rtol=1e-5)
        np.testing.assert_allclose(out["rollout_is_truncated"], truncated[loss_mask].mean(), rtol=1e-6)
        dropped = loss_mask.any(-1) & ~kept.any(-1)
        np.testing.assert_allclose(out["rollout_is_masked"], dropped.sum() / loss_mask.any(-1).sum(), rtol=1e-6)
    assert mismatch_metrics("token", old, sampler, mask, loss_mask, cfg)["rollout_is_truncated"] > 0
    assert mismatch_metrics("sequence", old, sampler, mask, loss_mask, cfg)["rollout_is_masked"] > 0


def loss_case(seed: int):
    """A batch of random sequences with logits, so that the trainer's ratio is away from 1 (clipped on some tokens)."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(M, P + L - 1, V)).astype(np.float32)
    response = rng.integers(2, V, size=(M, L))
    response[np.arange(M), rng.integers(1, L, size=M)] = tokens.EOS
    sequence = np.concatenate([rng.integers(2, V, size=(M, P)), response], axis=1).astype(np.int32)
    mask = np.asarray(tokens.response_mask(jnp.asarray(response)))
    log_p = special.log_softmax(logits[:, P - 1 :].astype(np.float64), -1)
    now = np.take_along_axis(log_p, response[..., None], -1)[..., 0]
    old = (now + 0.3 * rng.normal(size=(M, L))).astype(np.float32)
    sampler = (old + 0.2 * rng.normal(size=(M, L))).astype(np.float32)
    batch = SequenceBatch(
        sequence=jnp.asarray(sequence),
        mask=jnp.asarray(mask),
        log_prob=jnp.asarray(old),
        ref_log_prob=jnp.zeros((M, L), jnp.float32),
        value=jnp.zeros((M, L), jnp.float32),
        advantage=jnp.asarray(rng.normal(size=(M, L)), jnp.float32),
        target=jnp.zeros((M, L), jnp.float32),
        cov_key=jnp.zeros((M,), jnp.uint32),
        sampler_log_prob=jnp.asarray(sampler),
    )
    return logits, batch, now


@pytest.mark.parametrize("kind", ["none", "token", "sequence"])
@pytest.mark.parametrize("loss_agg", ["seq-mean-token-mean", "token-mean"])
def test_loss_is_the_weighted_clipped_surrogate(kind, loss_agg):
    logits, batch, now = loss_case(6)
    cfg = LmConfig(
        rollout_is=kind, rollout_is_threshold=C, rollout_is_threshold_low=LOW, loss_agg=loss_agg, kl_mode="none"
    )
    loss, metrics = jax.jit(lambda lg: loss_from_outputs(lg, None, batch, cfg, 0.0, prompt_len=P))(logits)
    old, adv, mask = (np.asarray(x, np.float64) for x in (batch.log_prob, batch.advantage, batch.mask))
    mask = mask.astype(bool)
    if kind == "none":
        weight = np.ones_like(old)
    else:
        weight = reference_weights(kind, batch.log_prob, batch.sampler_log_prob, mask)[0]
    expected = np.zeros(M)  # a slow loop over tokens
    per_token = np.zeros((M, L))
    for i in range(M):
        for t in range(L):
            if mask[i, t]:
                r = np.exp(now[i, t] - old[i, t])
                surrogate = min(r * adv[i, t], np.clip(r, 0.8, 1.2) * adv[i, t])
                per_token[i, t] = -weight[i, t] * surrogate
        expected[i] = per_token[i].sum() / mask[i].sum()
    if loss_agg == "token-mean":
        expected_loss = per_token.sum() / mask.sum()
    else:
        expected_loss = expected.mean()
    np.testing.assert_allclose(metrics["policy_loss"], expected_loss, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(loss, expected_loss, rtol=1e-4, atol=1e-6)


def test_the_correction_reweights_the_gradient_and_none_ignores_the_sampler():
    logits, batch, _ = loss_case(7)
    cfg = LmConfig(rollout_is_threshold=C, rollout_is_threshold_low=LOW, kl_mode="none", loss_agg="token-mean")

    def grad(cfg, batch):
        return jax.grad(lambda lg: loss_from_outputs(lg, None, batch, cfg, 0.0, prompt_len=P)[0])(logits)

    plain = grad(cfg, batch)
    np.testing.assert_array_equal(plain, grad(cfg, batch._replace(sampler_log_prob=batch.log_prob + 5.0)))
    # token: each response token's gradient row is the plain one times its weight (the weights are constants)
    weight = reference_weights("token", batch.log_prob, batch.sampler_log_prob, np.asarray(batch.mask))[0]
    weighted = grad(dataclasses.replace(cfg, rollout_is="token"), batch)
    np.testing.assert_allclose(weighted[:, P - 1 :], plain[:, P - 1 :] * weight[..., None], rtol=1e-4, atol=1e-8)


def test_thresholds_are_validated_and_inert_without_a_correction():
    assert {"rollout_is_threshold", "rollout_is_threshold_low"} <= set(LmConfig().inert_fields())
    assert "rollout_is_threshold_low" in LmConfig(rollout_is="token").inert_fields()
    assert not {"rollout_is_threshold", "rollout_is_threshold_low"} & set(
        LmConfig(rollout_is="sequence").inert_fields()
    )
    with pytest.raises(RelationError, match="rollout_is_threshold_low"):
        validate(LmConfig(rollout_is="sequence", rollout_is_threshold=2.0, rollout_is_threshold_low=2.0))
    with pytest.raises(ConfigError, match="rollout_is_threshold must be > 0"):
        validate(LmConfig(rollout_is="token", rollout_is_threshold=0.0))
    with pytest.raises(ConfigError, match="rollout_is"):
        validate(LmConfig(rollout_is="tokens"))
