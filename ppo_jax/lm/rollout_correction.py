"""The sampler-trainer mismatch: how far the rollout's sampler is from the policy the loss recomputes, and its
corrections (``ROLLOUT_CORRECTIONS``, ``cfg.rollout_is``).

The tokens of a rollout are drawn by a sampler (``models.sample``; with ``sampler_dtype`` a bfloat16 copy of
float32 weights, in a real system an inference engine) whose per-token log-probs ``log pi_s`` differ from the
ones the trainer recomputes for the same tokens, ``log pi_old`` (the batch's ``log_prob``, the anchor of the
PPO ratio ``r = pi / pi_old``). The surrogate then treats samples of ``pi_s`` as samples of ``pi_old``: the
gradient is biased, and the bias can grow until training collapses (Yao et al. 2025, "Your efficient RL
framework secretly brings you off-policy RL training"; Liu, Li et al. 2025, "When Speed Kills Stability:
Demystifying RL collapse from the training-inference mismatch").

Measured per update on the sampler's tokens (``mismatch``), summed over a response's tokens and averaged over
sequences, with ``log_r = log pi_old - log pi_s``: ``mismatch_kl`` = sum_t -log_r (k1) and ``mismatch_k3_kl`` =
sum_t exp(log_r) - 1 - log_r (k3; Schulman 2020), both unbiased estimates of KL(pi_s || pi_old) per sequence.

The corrections weight the per-token policy term of the loss (whatever the objective: the clipped surrogate
of ``r``, CISPO, REINFORCE) by a constant ``w`` (no gradient), as verl multiplies its ``pg_losses`` by
``rollout_is_weights`` ("decoupled" mode: the PPO ratio stays pi / pi_old, the correction is pi_old / pi_s):

| rollout_is  | weight of token t of response y                                          | policy term over           |
|-------------|--------------------------------------------------------------------------|----------------------------|
| ``none``    | 1                                                                        | every response token       |
| ``token``   | min(rho_t, C), rho_t = pi_old(y_t) / pi_s(y_t)                            | every response token       |
| ``sequence``| rho(y) = prod_t rho_t if low <= rho(y) <= C, else 0 (the response is dropped) | every response token       |

``token`` is truncated importance sampling (TIS; Yao et al. 2025; verl ``rollout_is: token`` in ``truncate``
mode), ``C = rollout_is_threshold``. ``sequence`` is sequence-level masked importance sampling (Seq-MIS; Liu,
Li et al. 2025; verl ``rollout_is_level: sequence`` in ``mask`` mode, its ``seq_mis`` preset with a lower
bound): the ratio is the product of the token ratios (the likelihood ratio of the whole response, not verl's
``geometric`` mean), ``low = rollout_is_threshold_low``; a response outside ``[low, C]`` gets weight 0 in the
policy term (rejection), one inside keeps its true weight. Unlike verl, whose rejection also removes the response
from the loss's denominator, the aggregation still counts it (as ``top_entropy_quantile`` does): the minibatch's
denominators stay those of ``batch.mask``, so gradient accumulation over micro-batches stays exact. The KL and
entropy terms are not reweighted. Rows of ``[M, L]``: ``M`` responses, ``L`` positions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from ppo_jax.lm.kl_estimators import kl_estimate
from ppo_jax.registry import Registry


class RolloutWeights(NamedTuple):
    """What a correction does to the policy term, ``[M, L]``: its constant weight, the tokens it keeps, and the
    tokens whose weight it truncated (``token``)."""

    weight: jax.Array  # float32; 0 on a dropped response's tokens, 1 off the mask
    kept: jax.Array  # bool: response tokens the policy term keeps (``mask`` minus dropped responses)
    truncated: jax.Array  # bool: kept tokens whose ratio exceeded the threshold and was cut to it


class Correction(NamedTuple):
    fn: Callable | None
    """``fn(log_ratio [M, L] (log pi_old - log pi_s, 0 off the mask), mask [M, L], *, threshold, threshold_low)
    -> RolloutWeights``; None: no correction (the loss is unchanged, bit for bit)."""
    doc: str
    reference: str = ""
    reads: tuple[str, ...] = ()


def _token(log_ratio, mask, *, threshold, threshold_low):
    ratio = jnp.exp(log_ratio)
    truncated = mask & (ratio > threshold)
    return RolloutWeights(jnp.where(mask, jnp.minimum(ratio, threshold), 1.0), mask, truncated)


def _sequence(log_ratio, mask, *, threshold, threshold_low):
    log_rho = jnp.sum(jnp.where(mask, log_ratio, 0.0), axis=-1, keepdims=True)  # [M, 1]
    log_high, log_low = jnp.log(threshold), jnp.log(threshold_low)  # compared in log space: no overflow
    kept = mask & (log_rho >= log_low) & (log_rho <= log_high)
    weight = jnp.exp(jnp.clip(log_rho, log_low, log_high))  # = rho on the kept responses
    return RolloutWeights(jnp.where(kept, weight, jnp.where(mask, 0.0, 1.0)), kept, jnp.zeros_like(mask))


ROLLOUT_CORRECTIONS: Registry[Correction] = Registry("rollout_is", "sampler-trainer mismatch correction")
ROLLOUT_CORRECTIONS.register("none", Correction(None, "no correction: the sampler's tokens count as pi_old's"))
ROLLOUT_CORRECTIONS.register(
    "token",
    Correction(
        _token,
        "policy term of token t x sg(min(pi_old / pi_sampler, C)) (truncated importance sampling)",
        "Yao et al. 2025; verl rollout_is=token (truncate)",
        ("rollout_is_threshold",),
    ),
)
ROLLOUT_CORRECTIONS.register(
    "sequence",
    Correction(
        _sequence,
        "policy term x sg(rho), rho = prod_t pi_old / pi_sampler; a response with rho outside [low, C] is dropped",
        "Liu, Li et al. 2025 (Seq-MIS); verl rollout_is_level=sequence (mask)",
        ("rollout_is_threshold", "rollout_is_threshold_low"),
    ),
)


def rollout_weights(
    kind: str,
    old_log_prob: jax.Array,
    sampler_log_prob: jax.Array,
    mask: jax.Array,
    *,
    threshold: jax.typing.ArrayLike,
    threshold_low: jax.typing.ArrayLike,
) -> RolloutWeights:
    """The correction ``kind`` (static, one of ``ROLLOUT_CORRECTIONS``) of the responses ``[M, L]`` (stop-gradient).

    Args:
      old_log_prob: ``[M, L]`` log pi_old, the trainer's log-probs of the sampled tokens.
      sampler_log_prob: ``[M, L]`` log pi_s, the ones the sampler drew them with.
      mask: ``[M, L]`` bool, the response tokens in the loss.
      threshold: C > 0, the upper bound (``token``: the truncation; ``sequence``: the mask's); may be traced.
      threshold_low: the ``sequence`` mask's lower bound, < C; may be traced.
    """
    fn = ROLLOUT_CORRECTIONS[kind].fn
    if fn is None:
        return RolloutWeights(jnp.ones(mask.shape, jnp.float32), mask, jnp.zeros_like(mask))
    log_ratio = jnp.where(mask, jax.lax.stop_gradient(old_log_prob - sampler_log_prob), 0.0)
    weights = fn(log_ratio, mask, threshold=threshold, threshold_low=threshold_low)
    return weights._replace(weight=jax.lax.stop_gradient(weights.weight))


def mismatch_metrics(
    kind: str, old_log_prob: jax.Array, sampler_log_prob: jax.Array, mask: jax.Array, loss_mask: jax.Array, cfg
) -> dict[str, jax.Array]:
    """Per-update scalars: the mismatch on the sampled responses ``mask [M, L]`` and what correction ``kind`` does to
    the policy term of the loss's tokens ``loss_mask [M, L]`` (``mask`` minus dynamic sampling's drops).

    ``mismatch_kl`` / ``mismatch_k3_kl``: mean over responses of the sum over their tokens of the k1 / k3 estimate
    of KL(pi_s || pi_old) (Schulman 2020); ``rollout_is_mean``: mean weight over the tokens the policy term keeps
    (1 under ``none``); ``rollout_is_truncated``: share of the loss's tokens whose weight ``token`` truncated;
    ``rollout_is_masked``: share of the loss's responses ``sequence`` dropped.
    """

    def summed(estimator):
        return jnp.where(mask, kl_estimate(sampler_log_prob, old_log_prob, estimator), 0.0).sum(-1).mean()

    weights = rollout_weights(
        kind,
        old_log_prob,
        sampler_log_prob,
        loss_mask,
        threshold=cfg.rollout_is_threshold,
        threshold_low=cfg.rollout_is_threshold_low,
    )
    present = loss_mask.any(-1)
    dropped = present & ~weights.kept.any(-1)
    return {
        "mismatch_kl": summed("k1"),
        "mismatch_k3_kl": summed("k3"),
        "rollout_is_mean": jnp.where(weights.kept, weights.weight, 0.0).sum() / jnp.maximum(weights.kept.sum(), 1),
        "rollout_is_truncated": weights.truncated.sum() / jnp.maximum(loss_mask.sum(), 1),
        "rollout_is_masked": dropped.sum() / jnp.maximum(present.sum(), 1),
    }
