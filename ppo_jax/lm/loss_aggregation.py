"""Per-token losses ``[M, L]`` to one scalar: what each mode divides by, over which tokens.

The choice sets how much each token and each response weighs in the gradient:
a per-response mean gives tokens of short responses more weight than tokens of long
ones (the length bias of Liu et al. 2025, Dr. GRPO), a token mean weighs every token
alike (Yu et al. 2025, DAPO, sec. 3.3).

Our modes, over the minibatch of one gradient step (one call); "present" rows are
those with at least one response token, ``n_i`` is row i's number of response
tokens, ``L`` the array's last dimension (the maximum response length), and every
sum runs over response tokens only:

| mode                        | result                                  | reference                              |
|-----------------------------|-----------------------------------------|----------------------------------------|
| ``token-mean``                | sum_{i,t} loss / sum_i n_i              | DAPO (Yu et al. 2025, sec. 3.3); PPO-RLHF |
| ``seq-mean-token-mean``       | mean over present i of sum_t loss / n_i | GRPO (Shao et al. 2024, eq. 3)         |
| ``seq-mean-token-sum``        | mean over present i of sum_t loss       |                                        |
| ``seq-mean-token-sum-norm``   | sum_{i,t} loss / (present rows x L)     | Dr. GRPO (Liu et al. 2025)             |

``LOSS_AGGREGATIONS`` is the table (``cfg.loss_agg``): each entry is a function of the
masked losses ``[M, L]``, the row lengths ``n_i [M]`` and the number of present rows.

Rows without response tokens (e.g. groups dropped by dynamic sampling) are absent:
they add nothing and are not counted. With no response token at all the result is 0.

Where the frameworks differ (verl ``core_algos.agg_loss``, 2026; TRL ``GRPOTrainer``):

- verl ``token-mean`` divides by the response tokens of the whole mini-batch of one
  optimizer step, summed across micro-batches and data-parallel ranks (as ours, where
  one call is that mini-batch; older verl divided per micro-batch). Its seq-mean
  modes divide by the mini-batch's present rows, as ours. Its
  ``seq-mean-token-sum-norm`` divides the sum by ``L`` (or a set ``loss_scale_factor``)
  only, not by the number of rows.
- TRL ``loss_type="grpo"`` is seq-mean-token-mean over all rows of the per-device
  micro-batch (an empty row counts as a 0), ``"bnpo"`` token-mean over the
  per-device micro-batch, ``"dr_grpo"`` sum / (rows x ``max_completion_length``,
  the generation budget, not the padded width), ``"dapo"`` sum / (response tokens
  of the whole accumulated batch / processes); the first three are then divided by
  the gradient-accumulation steps.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from ppo_jax.registry import Registry


class Aggregation(NamedTuple):
    fn: Callable
    """``fn(losses [M, L] (0 off the mask), lengths [M], num_tokens, num_present) -> scalar``: the counts are the
    denominators (at least 1), of the whole minibatch when ``aggregate`` is given its totals."""
    doc: str
    reference: str = ""


LOSS_AGGREGATIONS: Registry[Aggregation] = Registry("loss_agg", "loss aggregation")
LOSS_AGGREGATIONS.register(
    "token-mean",
    Aggregation(
        lambda losses, lengths, tokens, present: losses.sum() / tokens,
        "sum of the token losses / response tokens",
        "Yu et al. 2025 (DAPO), sec. 3.3; PPO-RLHF",
    ),
)
LOSS_AGGREGATIONS.register(
    "seq-mean-token-mean",
    Aggregation(
        lambda losses, lengths, tokens, present: (losses.sum(-1) / jnp.maximum(lengths, 1)).sum() / present,
        "mean over present responses of each one's token mean",
        "Shao et al. 2024 (GRPO), eq. 3",
    ),
)
LOSS_AGGREGATIONS.register(
    "seq-mean-token-sum",
    Aggregation(
        lambda losses, lengths, tokens, present: losses.sum() / present,
        "mean over present responses of each one's token sum",
    ),
)
LOSS_AGGREGATIONS.register(
    "seq-mean-token-sum-norm",
    Aggregation(
        lambda losses, lengths, tokens, present: losses.sum() / (present * losses.shape[-1]),
        "sum of the token losses / (present responses x L)",
        "Liu et al. 2025 (Dr. GRPO)",
    ),
)


def counts(mask: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``(response tokens, present rows)`` of ``mask [M, L]``, each at least 1: the modes' denominators."""
    lengths = mask.sum(-1)
    return jnp.maximum(lengths.sum(), 1), jnp.maximum((lengths > 0).sum(), 1)


def aggregate(per_token: jax.Array, mask: jax.Array, mode: str, totals=None) -> jax.Array:
    """Scalar loss of ``per_token [M, L]`` over the True entries of ``mask [M, L]`` by ``mode`` (static).

    ``totals``: ``(tokens, present rows, scale)`` of the whole minibatch when this is one of its micro-batches
    (``ppo_jax.minibatch_epochs``): the sums run over this call's rows, the denominators are the minibatch's
    divided by ``scale`` (the number of micro-batches), so the mean of the micro-batches' results is the
    minibatch's. None: this call is the minibatch. Masked entries enter through ``jnp.where``: they get exactly
    zero gradient even when they hold inf or NaN.
    """
    aggregation = LOSS_AGGREGATIONS[mode]
    losses = jnp.where(mask, per_token, 0.0)
    tokens, present, scale = (*counts(mask), 1) if totals is None else totals
    return aggregation.fn(losses, mask.sum(-1), tokens / scale, present / scale)
