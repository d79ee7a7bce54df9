"""Training a recurrent policy on whole env sequences: minibatches are sets of envs, each its full rollout.

A rollout of ``[T, B]`` steps becomes ``Sequences`` with the env axis first (``[B, T, ...]``), so
``ppo_jax.minibatch_epochs`` shuffles and splits envs, never steps. The loss runs the network over each env's
T steps from the GRU state stored at the rollout's start, with the rollout's resets: at the first epoch it
computes the rollout's own log-probs and values again (the importance ratio starts at 1), and the gradient
flows through the whole segment (truncated BPTT over T steps).
"""

from __future__ import annotations

from typing import NamedTuple

import jax

from ppo_jax.rl.ppo_loss import LossCoefficients, Minibatch, loss_from_outputs


class Sequences(NamedTuple):
    """Env sequences: ``steps`` a Minibatch with every field ``[B, T, ...]``; ``hidden``: the GRU states at the
    segment's start, one ``[B, H]`` per GRU; ``reset`` ``[B, T]``: step t starts an episode."""

    steps: Minibatch
    hidden: tuple
    reset: jax.Array


def from_rollout(steps: Minibatch, hidden: tuple, reset: jax.Array) -> Sequences:
    """``Sequences`` from a rollout's time-major ``steps`` (every field ``[T, B, ...]``) and ``reset`` ``[T, B]``."""
    return Sequences(jax.tree.map(lambda x: x.swapaxes(0, 1), steps), hidden, reset.swapaxes(0, 1))


def _flat(x: jax.Array) -> jax.Array:
    """``[T, B, ...] -> [T * B, ...]``."""
    return x.reshape((x.shape[0] * x.shape[1],) + x.shape[2:])


def forward(params, apply_fn, seqs: Sequences):
    """The network over every sequence: (dist with loc ``[T * B, A]``, value ``[T * B]``, the steps as a
    Minibatch of ``[T * B, ...]`` in the same time-major order)."""
    obs = seqs.steps.obs.swapaxes(0, 1)
    _, (dist, value) = apply_fn(params, seqs.hidden, obs, seqs.reset.swapaxes(0, 1))
    per_step_std = dist.log_std is not None and dist.log_std.ndim == dist.loc.ndim
    dist = dist._replace(loc=_flat(dist.loc), log_std=_flat(dist.log_std) if per_step_std else dist.log_std)
    steps = jax.tree.map(lambda x: _flat(x.swapaxes(0, 1)), seqs.steps)
    return dist, _flat(value), steps


def sequence_loss(params, apply_fn, seqs: Sequences, cfg, coefs: LossCoefficients):
    """The PPO loss (``ppo_jax.rl.ppo_loss``) over every step of ``seqs``, the network run along each sequence."""
    dist, value, steps = forward(params, apply_fn, seqs)
    return loss_from_outputs(dist, value, steps, cfg, coefs)
