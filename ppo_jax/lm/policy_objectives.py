"""Per-token policy losses of the critic-free LM family: clipped (PPO, DAPO, dual clip, GSPO), CISPO, REINFORCE.

With ``r = exp(log_ratio)`` (token or sequence level, see ``log_ratio``) and the
advantage ``A`` of a token, the loss is the negated objective:

| kind      | objective maximised                                  | reference                                          |
|-----------|------------------------------------------------------|----------------------------------------------------|
| ``clip``    | min(r A, clip(r, 1 - eps_low, 1 + eps_high) A)       | Schulman et al. 2017, eq. 7; Yu et al. 2025 (DAPO) |
|           | with ``dual_clip``, for A < 0: max(that, c A), c > 1   | Ye et al. 2020, eq. 5                              |
| ``cispo``   | sg(clip(r, 1 - eps_low, 1 + eps_high)) A log pi      | MiniMax 2025 (MiniMax-M1), arXiv:2506.13585        |
| ``pg``      | A log pi                                             | Williams 1992 (REINFORCE)                          |

``clip`` zeroes the gradient of a token once its ratio leaves the range on the side
its advantage pushes; ``cispo`` never does: the clipped weight is a constant and
``log pi`` keeps its gradient, ``sg(clip(r)) A grad log pi``. ``pg`` is the exact
gradient on-policy (r = 1) and ignores ``old_log_prob``. DAPO's decoupled range
(eps_high > eps_low, "clip-higher") keeps low-probability tokens rising; MiniMax-M1
tunes only eps_high for CISPO (eps_low large: no lower bound in effect). ``level="sequence"``
with ``clip`` is GSPO (Zheng et al. 2025, arXiv:2507.18071).

``POLICY_LOSSES`` and ``RATIOS`` are the tables of both switch families (``cfg.policy_loss``,
``cfg.ratio``): a new objective is one ``register`` call with a function of one signature
(``Objective.fn``), the config's choices, inert fields and docs follow.

Shapes: ``[M, L]`` everywhere; ``mask [M, L]`` bool marks response tokens. Masked
entries enter through ``jnp.where``: their loss is 0 with exactly zero gradient,
also when ``log_prob`` holds inf or NaN there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from ppo_jax.registry import Registry


class ClipStats(NamedTuple):
    """Per-token float32 indicators ``[M, L]`` (0 on masked tokens) and the ratio, for the caller to aggregate.

    For ``clip``: ``low`` = A < 0 and r < 1 - eps_low, ``high`` = A > 0 and r > 1 + eps_high
    (the clip zeroes the token's gradient), ``dual`` = dual clip on, A < 0 and r > c (the
    bound c A is active). For ``cispo``: ``low`` = r < 1 - eps_low and ``high`` = r > 1 + eps_high
    whatever the sign of A (the weight is clipped; the gradient survives); ``dual`` = 0.
    For ``pg`` all three are 0.
    """

    low: jax.Array
    high: jax.Array
    dual: jax.Array
    ratio: jax.Array  # [M, L] r, 1 on masked tokens


class Ratio(NamedTuple):
    fn: Callable
    """``fn(token_log_ratio [M, L] (0 on masked tokens), mask [M, L]) -> log r [M, L]``."""
    doc: str
    reference: str = ""


def _token_ratio(token_log_ratio, mask):
    return token_log_ratio


def _sequence_ratio(token_log_ratio, mask):
    lengths = jnp.maximum(mask.sum(-1, keepdims=True), 1)
    return jnp.where(mask, token_log_ratio.sum(-1, keepdims=True) / lengths, 0.0)


RATIOS: Registry[Ratio] = Registry("ratio", "ratio level")
RATIOS.register("token", Ratio(_token_ratio, "pi / pi_old of each token", "Schulman et al. 2017"))
RATIOS.register(
    "sequence",
    Ratio(_sequence_ratio, "(pi(y|x) / pi_old(y|x))^(1/|y|) on every token", "Zheng et al. 2025 (GSPO)"),
)


class RatioTerms(NamedTuple):
    """What every objective may use, ``[M, L]``: r, clip(r, 1 - eps_low, 1 + eps_high), r below / above the range."""

    ratio: jax.Array
    clipped: jax.Array
    below: jax.Array
    above: jax.Array


class Objective(NamedTuple):
    fn: Callable
    """``fn(terms: RatioTerms, advantage, log_prob, mask, *, dual_clip, dual_clip_c) -> (objective, low, high, dual)``:
    the per-token objective maximised ``[M, L]`` and the bool indicators of ``ClipStats``."""
    doc: str
    reference: str = ""
    reads: tuple[str, ...] = ()
    """The config fields it reads (the other objectives' fields are inert under it)."""
    zeroes_clipped: bool = False
    """The tokens its ``ClipStats.low`` / ``high`` mark get zero gradient (Clip-Cov leaves them alone)."""


def _clip(terms, advantage, log_prob, mask, *, dual_clip, dual_clip_c):
    objective = jnp.minimum(terms.ratio * advantage, terms.clipped * advantage)
    dual = jnp.zeros_like(mask)
    if dual_clip:
        objective = jnp.where(advantage < 0, jnp.maximum(objective, dual_clip_c * advantage), objective)
        dual = (advantage < 0) & (terms.ratio > dual_clip_c)
    return objective, terms.below & (advantage < 0), terms.above & (advantage > 0), dual


def _cispo(terms, advantage, log_prob, mask, *, dual_clip, dual_clip_c):
    objective = jax.lax.stop_gradient(terms.clipped) * advantage * jnp.where(mask, log_prob, 0.0)
    return objective, terms.below, terms.above, jnp.zeros_like(mask)


def _pg(terms, advantage, log_prob, mask, *, dual_clip, dual_clip_c):
    no_token = jnp.zeros_like(mask)
    return advantage * jnp.where(mask, log_prob, 0.0), no_token, no_token, no_token


POLICY_LOSSES: Registry[Objective] = Registry("policy_loss", "policy loss")
POLICY_LOSSES.register(
    "clip",
    Objective(
        _clip,
        "min(r A, clip(r, 1 - eps_low, 1 + eps_high) A); with dual_clip, for A < 0 at least c A",
        "Schulman et al. 2017, eq. 7; Yu et al. 2025 (DAPO); Ye et al. 2020, eq. 5",
        ("clip_eps_low", "clip_eps_high", "ratio", "dual_clip"),
        zeroes_clipped=True,
    ),
)
POLICY_LOSSES.register(
    "cispo",
    Objective(
        _cispo,
        "sg(clip(r, 1 - eps_low, 1 + eps_high)) A log pi",
        "MiniMax 2025 (MiniMax-M1), arXiv:2506.13585",
        ("clip_eps_low", "clip_eps_high", "ratio"),
    ),
)
POLICY_LOSSES.register("pg", Objective(_pg, "A log pi (on-policy gradient)", "Williams 1992 (REINFORCE)"))


def log_ratio(log_prob: jax.Array, old_log_prob: jax.Array, mask: jax.Array, level: str) -> jax.Array:
    """``log r [M, L]``, 0 on masked tokens; ``level`` (static) is one of ``RATIOS``.

    ``token``: ``log_prob - old_log_prob``. ``sequence`` (GSPO, Zheng et al. 2025):
    ``log s_i = (1/|y_i|) sum_t (log_prob - old_log_prob)`` over row i's response
    tokens, broadcast to them, so ``s_i = (pi(y_i|x) / pi_old(y_i|x))^(1/|y_i|)``;
    the gradient reaches every token's ``log_prob``, scaled by ``1/|y_i|``.
    """
    ratio = RATIOS[level]
    return ratio.fn(jnp.where(mask, log_prob - old_log_prob, 0.0), mask)


def policy_loss(
    kind: str,
    log_prob: jax.Array,
    old_log_prob: jax.Array,
    advantage: jax.Array,
    mask: jax.Array,
    *,
    level: str = "token",
    eps_low: jax.typing.ArrayLike,
    eps_high: jax.typing.ArrayLike,
    dual_clip: bool = False,
    dual_clip_c: jax.typing.ArrayLike = 3.0,
) -> tuple[jax.Array, ClipStats]:
    """``(per-token loss [M, L], ClipStats)`` of ``kind`` (static, one of ``POLICY_LOSSES``); loss 0 on masked tokens.

    Args:
      log_prob: ``[M, L]`` log pi(a_t | s_t) under the current parameters.
      old_log_prob: ``[M, L]`` the same under the policy that sampled the batch.
      advantage: ``[M, L]``.
      mask: ``[M, L]`` bool, response tokens.
      level: ratio level (static), ``"token"`` or ``"sequence"`` (GSPO).
      eps_low, eps_high: the ratio range ``[1 - eps_low, 1 + eps_high]``; may be traced.
      dual_clip: (static) bound the ``clip`` objective by ``dual_clip_c * A`` for A < 0.
      dual_clip_c: c > 1; may be traced (verl's default 3).
    """
    objective_fn = POLICY_LOSSES[kind].fn
    ratio = jnp.exp(log_ratio(log_prob, old_log_prob, mask, level))
    advantage = jnp.where(mask, advantage, 0.0)
    clipped_ratio = jnp.clip(ratio, 1.0 - eps_low, 1.0 + eps_high)
    terms = RatioTerms(ratio, clipped_ratio, ratio < 1.0 - eps_low, ratio > 1.0 + eps_high)
    objective, low, high, dual = objective_fn(
        terms, advantage, log_prob, mask, dual_clip=dual_clip, dual_clip_c=dual_clip_c
    )

    def indicator(x):
        return (x & mask).astype(jnp.float32)

    stats = ClipStats(low=indicator(low), high=indicator(high), dual=indicator(dual), ratio=ratio)
    return jnp.where(mask, -objective, 0.0), stats
