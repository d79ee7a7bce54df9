"""The names of what an lm or rlhf run records (the rlhf task's per-update names as before 0.3.0)."""

from __future__ import annotations

from ppo_jax.final_values import NON_FINITE
from ppo_jax.lm.config import RlhfConfig
from ppo_jax.lm.kl_estimators import KL_ESTIMATORS
from ppo_jax.lm.pass_rates import PASS_AT_K, TRAIN_PASS_AT_K

LOSS_METRICS = ("policy_loss", "value_loss", "approx_kl", "clip_fraction", "explained_variance", "grad_norm", "loss")

RLHF_METRIC_NAMES = (
    "score",
    "true_score",
    "kl_ref",
    "kl_ref_sample",
    "response_length",
    "eos_fraction",
    "entropy",
    "total_reward",
    *LOSS_METRICS,
    "learning_rate",
    NON_FINITE,
)
"""Per-update metrics of the rlhf task, each the mean over the update's sequences (rollout) or its minibatch steps
(loss terms): score (the reward model's, or the programmatic one), true_score (programmatic), kl_ref (sum over
response tokens of the exact KL(pi || pi_ref) per state), kl_ref_sample (sum of log pi - log pi_ref at the sampled
tokens: the quantity in the reward), response_length (tokens, EOS included), eos_fraction, entropy (per response
token), total_reward (score - beta * kl_ref_sample), the PPO loss terms per response token, the learning rate in
effect, and non_finite (1.0 when the loss or the training state is NaN or infinite after the update:
``ppo_jax.scan_updates``)."""
METRIC_NAMES = RLHF_METRIC_NAMES  # the name before 0.3.0

LM_METRIC_NAMES = (
    "accuracy",
    "reward",
    "pass_at_group",
    *(f"pass_at_{k}" for k in TRAIN_PASS_AT_K),
    "well_formed",
    "response_length",
    "truncated",
    "length_correct",
    "length_incorrect",
    "sample_entropy",
    "entropy",
    "kl_ref",
    "kl_ref_estimate",
    *(f"kl_{name}_{error}" for name in KL_ESTIMATORS.names() for error in ("bias", "rmse")),
    "zero_variance_groups",
    "kept_fraction",
    "beta",
    "mismatch_kl",
    "mismatch_k3_kl",
    "rollout_is_mean",
    "rollout_is_truncated",
    "rollout_is_masked",
    "policy_loss",
    "kl_loss",
    "value_loss",
    "approx_kl",
    "clip_low",
    "clip_high",
    "clip_dual",
    "ratio_min",
    "ratio_max",
    "cov_picked",
    "entropy_token_share",
    "explained_variance",
    "grad_norm",
    "loss",
    "learning_rate",
    NON_FINITE,
)
"""Per-update metrics of the lm task. Rollout (over the update's sequences): accuracy (sampled pass@1: the share of
responses exactly right), reward (the sequence score the advantages use: correctness + format reward + overlong
punishment, or the reward model's), pass_at_group (share of prompts with a right response among its group), pass_at_2 / _4 / _8 / _16 (the unbiased
pass@k from each prompt's group, Chen et al. 2021; NaN above the group size),
well_formed, response_length (tokens, EOS included), truncated (share cut at max_response_len without EOS),
length_correct / length_incorrect (mean length of right / wrong responses; NaN when there are none),
sample_entropy (exact entropy per response token of the policy that sampled, mean over the update's tokens), kl_ref
(exact KL(pi || pi_ref) summed over a response's tokens), kl_ref_estimate (the configured estimator, summed), kl_k1_bias / kl_k1_rmse (and k2's, k3's: each estimator's mean and
root-mean-square error per response token against the exact per-token KL, on the same tokens, whatever kl_estimator
the run uses: ``kl_estimators.estimator_errors``), zero_variance_groups (share of groups whose rewards are all equal), kept_fraction
(share of sequences in the loss: below 1 only with dynamic sampling), beta (the KL coefficient in effect),
mismatch_kl / mismatch_k3_kl (the sampler-trainer mismatch: the k1 / k3 estimate of KL(pi_sampler || pi_old) summed
over a response's tokens; about 0 unless sampler_dtype differs from the compute dtype), rollout_is_mean (mean
importance weight of rollout_is over the tokens its policy term keeps; 1 under none), rollout_is_truncated (share of
tokens whose weight rollout_is token truncated), rollout_is_masked (share of responses rollout_is sequence dropped):
``rollout_correction.mismatch_metrics``. Loss (mean
over the minibatch steps): entropy (exact, per response token, of the policy being trained, aggregated as the loss),
policy_loss, kl_loss (the KL term before beta; 0 unless kl_mode is loss), value_loss
(0 without a critic), approx_kl (to the sampling policy), clip_low / clip_high / clip_dual (share of response tokens
whose gradient the lower clip, the upper clip, or the dual clip bound took: ``policy_objectives.ClipStats``),
ratio_min / ratio_max (per minibatch, averaged), cov_picked (share of tokens Clip-Cov or KL-Cov picked), entropy_token_share (share of response tokens the
policy term trains on: below 1 only with top_entropy_quantile),
explained_variance (NaN without a critic), grad_norm, loss, learning_rate; non_finite."""

LM_EVAL_NAMES = ("eval_pass_at_1", "eval_pass_at_group", *(f"eval_pass_at_{k}" for k in PASS_AT_K[1:]))
"""Per run of the lm task: pass@1, pass@group_size and pass@k for k = 2, 4, ..., 256 (NaN above the samples per
prompt: ``eval_samples``, or group_size) of the final policy on ``eval_prompts`` fresh prompts; the unbiased
estimator of Chen et al. (2021, eq. 1)."""


def metric_names(cfg) -> tuple[str, ...]:
    """The per-update metrics of ``cfg``'s task: rlhf's for an RlhfConfig, lm's otherwise."""
    return RLHF_METRIC_NAMES if isinstance(cfg, RlhfConfig) else LM_METRIC_NAMES


def eval_names(cfg) -> tuple[str, ...]:
    """The per-run evaluation scalars of ``cfg``'s task (the rlhf task has none)."""
    return () if isinstance(cfg, RlhfConfig) else LM_EVAL_NAMES
