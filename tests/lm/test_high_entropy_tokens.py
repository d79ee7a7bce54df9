"""Training on the highest-entropy tokens only (Wang et al. 2025; TRL's top_entropy_quantile)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import special

from ppo_jax.lm.config import LmConfig
from ppo_jax.lm.token_loss import SequenceBatch, loss_from_outputs
from ppo_jax.lm.token_math import high_entropy_tokens

high_entropy_tokens = jax.jit(high_entropy_tokens)


@pytest.mark.parametrize("share", [0.05, 0.2, 0.5, 1.0])
def test_the_top_share_by_entropy_against_numpy_quantiles(share):
    rng = np.random.default_rng(0)
    entropy = rng.gamma(2.0, size=(32, 24)).astype(np.float32)
    mask = rng.random((32, 24)) < 0.7
    entropy[~mask] = 100.0  # padding never counts, however large
    got = np.asarray(high_entropy_tokens(entropy, mask, share))
    threshold = np.quantile(entropy[mask], 1 - share)  # linear interpolation, as torch.quantile
    np.testing.assert_array_equal(got, mask & (entropy >= threshold))
    assert abs(got.sum() / mask.sum() - share) < 0.01
    if share == 1.0:
        np.testing.assert_array_equal(got, mask)


def test_only_the_top_tokens_get_a_policy_gradient():
    rng = np.random.default_rng(1)
    rows, prompt_len, length, vocab = 8, 3, 6, 15
    sequence = rng.integers(2, vocab, size=(rows, prompt_len + length)).astype(np.int32)
    mask = np.ones((rows, length), bool)
    mask[::2, 4:] = False
    # logits of very different sharpness, so the entropies spread out
    scale = rng.choice([0.1, 1.0, 5.0], size=(rows, prompt_len + length - 1, 1))
    logits = jnp.asarray(rng.normal(size=(rows, prompt_len + length - 1, vocab)) * scale, jnp.float32)
    log_p = special.log_softmax(np.asarray(logits, np.float64)[:, prompt_len - 1 :], -1)
    old = np.take_along_axis(log_p, sequence[:, prompt_len:, None], -1)[..., 0]  # ratio 1: nothing is clipped
    batch = SequenceBatch(
        sequence=jnp.asarray(sequence),
        mask=jnp.asarray(mask),
        log_prob=jnp.asarray(old, jnp.float32),
        ref_log_prob=jnp.zeros((rows, length), jnp.float32),
        value=jnp.zeros((rows, length), jnp.float32),
        advantage=jnp.asarray(rng.normal(size=(rows, length)), jnp.float32),
        target=jnp.zeros((rows, length), jnp.float32),
        cov_key=jnp.zeros((rows,), jnp.uint32),
    )
    cfg = LmConfig(top_entropy_quantile=0.2, kl_mode="none", ent_coef=0.0)

    def loss(logits):
        return loss_from_outputs(logits, None, batch, cfg, 0.0, prompt_len=prompt_len)

    grad, metrics = jax.jit(jax.grad(loss, has_aux=True))(logits)
    entropy = -(np.exp(log_p) * log_p).sum(-1)
    top = mask & (entropy >= np.quantile(entropy[mask], 0.8))
    moved = np.abs(np.asarray(grad)[:, prompt_len - 1 :]).sum(-1) > 0
    np.testing.assert_array_equal(moved, top)
    assert float(metrics["entropy_token_share"]) == pytest.approx(top.sum() / mask.sum())
