"""The loss of one minibatch of whole sequences: policy term, KL to the reference, entropy, value (with a critic).

Each term is a per-token quantity on response tokens, made one number by the
run's ``loss_agg`` (``loss_aggregation.aggregate``; the critic's value loss is
always a token mean):

    loss = policy + beta * KL(pi || pi_ref) [kl_mode loss] - ent_coef * entropy + vf_coef * value [critic]

Log-probabilities and the entropy are of the distribution the rollout sampled
from (``temperature``, ``top_k``, ``top_p``; ``sampling.token_log_prob``). The policy term is ``policy_objectives.policy_loss`` (clip with clip_eps_low /
clip_eps_high and an optional dual clip, CISPO, or REINFORCE), on a per-token or
per-sequence ratio; ``cov_reg`` adds Cui et al.'s (2025) Clip-Cov (zero the
loss of a few high-covariance tokens) or KL-Cov (penalise |log pi - log
pi_old| on the tokens of largest covariance). With ``top_entropy_quantile`` below 1
the policy term is kept only on the minibatch's top share of response tokens by
entropy (Wang et al. 2025), as TRL does: the KL and entropy terms and every
aggregation's denominator still count all response tokens. ``rollout_is`` weights
the policy term of each token by a constant importance weight pi_old / pi_sampler
(truncated; or 0 for whole responses outside a range) against the sampler-trainer mismatch
(``rollout_correction.py``). With ``norm_adv`` the advantages
are whitened over the minibatch's response tokens first (PPO-RLHF). Prompt
positions, padding and the sequences that dynamic sampling dropped are out of
``batch.mask``, so they get exactly zero gradient (also when their values are
inf or NaN).

With micro-batches (``cfg.micro_batches``, gradient accumulation in ``ppo_jax.minibatch_epochs``) every
minibatch-level quantity is the whole minibatch's (``MinibatchTotals``: its response tokens and present rows, the
aggregations' denominators, and its advantage mean and std for ``norm_adv``), so the accumulated loss, gradient
and token-mean metrics are the minibatch's to float rounding; ``ratio_min``/``ratio_max`` and
``explained_variance`` are then means of the micro-batches' values. (``cov_reg`` and ``top_entropy_quantile`` < 1
rank the minibatch's tokens by the current policy: ``memory_switches`` refuses them with micro-batches.)
"""

from __future__ import annotations

from typing import NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp

from ppo_jax.lm import sampling
from ppo_jax.lm.covariance_regularizers import COVARIANCE_REGULARIZERS, covariance_regularized_loss
from ppo_jax.lm.kl_estimators import KL_MODES, kl_estimate
from ppo_jax.lm.loss_aggregation import aggregate, counts
from ppo_jax.lm.models import run
from ppo_jax.lm.policy_objectives import POLICY_LOSSES, policy_loss
from ppo_jax.lm.rollout_correction import ROLLOUT_CORRECTIONS, rollout_weights
from ppo_jax.lm.token_math import high_entropy_tokens, masked_explained_variance, masked_mean
from ppo_jax.losses import value_loss


class SequenceBatch(NamedTuple):
    """Whole sequences; ``M`` sequences, ``L`` response positions."""

    sequence: jax.Array  # [M, P + L] int32, prompt then response
    mask: jax.Array  # [M, L] bool, the response tokens that enter the loss
    log_prob: jax.Array  # [M, L] log pi_old(a_t | s_t)
    ref_log_prob: jax.Array  # [M, L] log pi_ref(a_t | s_t)
    value: jax.Array  # [M, L] V_old(s_t); 0 without a critic
    advantage: jax.Array  # [M, L]
    target: jax.Array  # [M, L] value target; 0 without a critic
    cov_key: jax.Array  # [M] keys: Clip-Cov draws its tokens with the minibatch's first
    sampler_log_prob: jax.Array | None = None  # [M, L] log pi_sampler(a_t | s_t), as drawn (rollout_correction.py)


class MinibatchTotals(NamedTuple):
    """What a micro-batch's loss needs of its whole minibatch (data only, no gradient): scalars."""

    tokens: jax.Array  # response tokens (at least 1)
    present: jax.Array  # rows with a response token (at least 1)
    scale: int  # micro-batches per minibatch: a micro-batch's loss is scale x its share of the minibatch's
    advantage_mean: jax.Array  # over the response tokens (norm_adv)
    advantage_std: jax.Array  # population std over the response tokens (norm_adv)


def minibatch_totals(batch: SequenceBatch, micro_batches: int = 1) -> MinibatchTotals:
    """The ``MinibatchTotals`` of ``batch``, a whole minibatch to be cut into ``micro_batches``."""
    mean = masked_mean(batch.advantage, batch.mask)
    std = jnp.sqrt(masked_mean((batch.advantage - mean) ** 2, batch.mask))
    return MinibatchTotals(*counts(batch.mask), micro_batches, mean, std)


def _share_mean(x: jax.Array, mask: jax.Array, totals: MinibatchTotals) -> jax.Array:
    """This call's part of the minibatch's token mean of ``x``, times ``totals.scale`` (see ``MinibatchTotals``)."""
    return jnp.where(mask, x, 0.0).sum() / (totals.tokens / totals.scale)


def loss_from_outputs(
    logits: jax.Array,
    values: jax.Array | None,
    batch: SequenceBatch,
    cfg,
    beta,
    *,
    prompt_len: int,
    totals: MinibatchTotals | None = None,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """The loss from the actor's logits ``[M, P + L - 1, V]`` and the critic's values ``[M, P + L - 1]`` (or None).

    Both are the models' outputs at every input position (teacher forcing on
    ``sequence[:, :-1]``); rows before ``prompt_len - 1`` predict prompt tokens and
    are unused. ``beta`` is the KL coefficient in effect (fixed, or adapted). ``totals``: those of the
    minibatch ``batch`` is a micro-batch of (None: ``batch`` is the minibatch).
    Returns ``(loss, metrics)``.
    """
    totals = minibatch_totals(batch) if totals is None else totals
    denominators = (totals.tokens, totals.present, totals.scale)
    logits = logits[:, prompt_len - 1 :]
    response, mask = batch.sequence[:, prompt_len:], batch.mask
    advantage = batch.advantage
    if cfg.norm_adv:
        advantage = (advantage - totals.advantage_mean) / (totals.advantage_std + 1e-8)
    knobs = cfg.rollout_sampling  # the distribution the tokens were drawn from (sampling.py)
    log_prob = sampling.token_log_prob(logits, response, knobs)
    per_token, clip = policy_loss(
        cfg.policy_loss,
        log_prob,
        batch.log_prob,
        advantage,
        mask,
        level=cfg.ratio,
        eps_low=cfg.clip_eps_low,
        eps_high=cfg.clip_eps_high,
        dual_clip=cfg.dual_clip,
        dual_clip_c=cfg.dual_clip_c,
    )
    metrics = {}
    regularizer = COVARIANCE_REGULARIZERS[cfg.cov_reg]
    if regularizer.fn is not None:
        per_token, picked = covariance_regularized_loss(
            cfg.cov_reg,
            per_token,
            log_prob,
            batch.log_prob,
            advantage,
            mask,
            batch.cov_key[0],
            fraction=getattr(cfg, regularizer.fraction_field),
            cov_low=cfg.clip_cov_low,
            cov_high=cfg.clip_cov_high,
            kl_coef=cfg.kl_cov_coef,
            already_clipped=((clip.low + clip.high) > 0) if POLICY_LOSSES[cfg.policy_loss].zeroes_clipped else None,
            expected_count=cfg.cov_expected_count,
        )
        metrics["cov_picked"] = _share_mean(picked, mask, totals)
    entropy = sampling.entropy(logits, knobs)
    trained = high_entropy_tokens(jax.lax.stop_gradient(entropy), mask, cfg.top_entropy_quantile)
    per_token = jnp.where(trained, per_token, 0.0)  # the policy term only; the aggregation's denominator stays
    if ROLLOUT_CORRECTIONS[cfg.rollout_is].fn is not None:  # the sampler-trainer mismatch's correction
        correction = rollout_weights(
            cfg.rollout_is,
            batch.log_prob,
            batch.sampler_log_prob,
            mask,
            threshold=cfg.rollout_is_threshold,
            threshold_low=cfg.rollout_is_threshold_low,
        )
        per_token = per_token * correction.weight
    log_ratio = log_prob - batch.log_prob
    ratio = jnp.exp(log_ratio)
    metrics.update(
        policy_loss=aggregate(per_token, mask, cfg.loss_agg, denominators),
        entropy_token_share=_share_mean(trained, mask, totals),
        entropy=aggregate(entropy, mask, cfg.loss_agg, denominators),
        approx_kl=_share_mean((ratio - 1.0) - log_ratio, mask, totals),
        clip_fraction=_share_mean((jnp.abs(ratio - 1.0) > cfg.clip_eps_low).astype(jnp.float32), mask, totals),
        clip_low=_share_mean(clip.low, mask, totals),
        clip_high=_share_mean(clip.high, mask, totals),
        clip_dual=_share_mean(clip.dual, mask, totals),
        ratio_min=jnp.where(mask.any(), jnp.where(mask, clip.ratio, jnp.inf).min(), 1.0),
        ratio_max=jnp.where(mask.any(), jnp.where(mask, clip.ratio, -jnp.inf).max(), 1.0),
    )
    loss = metrics["policy_loss"]
    if values is not None:
        values = values[:, prompt_len - 1 :]
        per_token_value = value_loss(
            values, batch.value, batch.target, vf_clip_eps=cfg.vf_clip_eps, clip=cfg.clip_vloss
        )
        metrics["value_loss"] = _share_mean(per_token_value, mask, totals)
        metrics["explained_variance"] = masked_explained_variance(values, batch.target, mask)
        loss = loss + cfg.vf_coef * metrics["value_loss"]
    loss = loss - cfg.ent_coef * metrics["entropy"]
    if KL_MODES[cfg.kl_mode].in_loss:
        kl = kl_estimate(log_prob, batch.ref_log_prob, cfg.kl_estimator)
        metrics["kl_loss"] = aggregate(kl, mask, cfg.loss_agg, denominators)
        loss = loss + beta * metrics["kl_loss"]
    return loss, metrics


def sequence_loss(
    params, actor: nn.Module, critic: nn.Module | None, batch: SequenceBatch, cfg, beta, totals=None
) -> tuple[jax.Array, dict]:
    """``loss_from_outputs`` of the actor ``params["actor"]`` (and critic ``params["critic"]``) on ``batch`` (a
    micro-batch of the minibatch of ``totals``, or None: the minibatch)."""
    inputs = batch.sequence[:, :-1]
    logits = run(actor, params["actor"], inputs)
    values = None if critic is None else run(critic, params["critic"], inputs)[..., 0]
    prompt_len = batch.sequence.shape[-1] - batch.mask.shape[-1]
    return loss_from_outputs(logits, values, batch, cfg, beta, prompt_len=prompt_len, totals=totals)
