"""The names of what a PPO run records: per-update metrics and per-run evaluation scalars."""

from __future__ import annotations

from ppo_jax.final_values import NON_FINITE

METRIC_NAMES = (
    "episode_return",
    "episode_length",
    "episodes",
    "policy_loss",
    "value_loss",
    "entropy",
    "approx_kl",
    "clip_fraction",
    "explained_variance",
    "grad_norm",
    "loss",
    "kl",
    "update_fraction",
    "learning_rate",
    "clip_eps",
    "ent_coef",
    "kl_beta",
    NON_FINITE,
)
"""Per-update metrics of ``ppo_jax.rl.train.train`` (each ``[num_updates]``): episodic return and length (mean over
envs of each env's last finished episode; NaN until one has ended), episodes finished during the rollout, the loss
terms averaged over the update's minibatch steps, the exact KL(pi_old || pi_new) after the update, the share of
minibatch steps taken, the coefficients in effect (learning rate, clip_eps, ent_coef, kl_beta), and non_finite
(1.0 when the loss or the training state is NaN or infinite after the update: ``ppo_jax.scan_updates``)."""

EVAL_NAMES = ("eval_return_stochastic", "eval_return_deterministic")
"""Per run: mean return of the final parameters over fresh episodes (``ppo_jax.rl.evaluate``), each policy."""
