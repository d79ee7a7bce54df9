"""Per-sample losses every task shares: the family of policy objectives PPO is compared with
(negated objectives) and the (clipped) value loss.

With ``r = exp(log_prob - old_log_prob)`` and advantage ``A``:

| objective     | objective maximised                                   | reference                          |
|---------------|-------------------------------------------------------|------------------------------------|
| ``clip``        | min(r A, clip(r, 1-eps, 1+eps) A)                     | Schulman et al. 2017, eq. 7        |
| ``clip_no_min`` | clip(r, 1-eps, 1+eps) A                               | ablation: "why is min needed"      |
| ``unclipped``   | r A                                                   | Schulman et al. 2017, eq. 6 (CPI) |
| ``kl_fixed``    | r A - beta KL(pi_old || pi)                           | Schulman et al. 2017, eq. 8        |
| ``kl_adaptive`` | r A - beta KL(pi_old || pi), beta adapted per update  | Schulman et al. 2017, sec. 4       |
| ``dual_clip``   | clip objective; for A < 0 also bounded below by c A   | Ye et al. 2020, eq. 5              |

The KL term is the exact KL between the old and the new action distribution at
the sample's state (not a sample estimate). ``OBJECTIVES`` is the table of the family
(``PPOConfig.objective``): what each objective reads, whether it needs the KL, whether
its beta is adapted; the config's choices, inert fields and docs/switches.md follow from it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from ppo_jax.registry import Registry


def clipped_surrogate_loss(
    log_prob: jax.Array,
    old_log_prob: jax.Array,
    advantage: jax.Array,
    *,
    clip_eps: jax.typing.ArrayLike,
) -> jax.Array:
    """Per-sample ``-min(r A, clip(r, 1-eps, 1+eps) A)`` with ``r = exp(log_prob - old_log_prob)``.

    The ``min`` takes the pessimistic side: for A > 0 the objective stops growing
    once r > 1 + eps (zero gradient), for A < 0 once r < 1 - eps; on the other
    side of the range the unclipped term is smaller and keeps its gradient.
    Same shape as the inputs.
    """
    ratio = jnp.exp(log_prob - old_log_prob)
    unclipped = ratio * advantage
    clipped = jnp.clip(ratio, 1.0 - clip_eps, 1.0 + clip_eps) * advantage
    return -jnp.minimum(unclipped, clipped)


def _clip(log_prob, old_log_prob, advantage, kl, *, clip_eps, kl_beta, dual_clip_c):
    return clipped_surrogate_loss(log_prob, old_log_prob, advantage, clip_eps=clip_eps)


def _clip_no_min(log_prob, old_log_prob, advantage, kl, *, clip_eps, kl_beta, dual_clip_c):
    return -jnp.clip(jnp.exp(log_prob - old_log_prob), 1.0 - clip_eps, 1.0 + clip_eps) * advantage


def _unclipped(log_prob, old_log_prob, advantage, kl, *, clip_eps, kl_beta, dual_clip_c):
    return -jnp.exp(log_prob - old_log_prob) * advantage


def _kl_penalty(log_prob, old_log_prob, advantage, kl, *, clip_eps, kl_beta, dual_clip_c):
    return -(jnp.exp(log_prob - old_log_prob) * advantage - kl_beta * kl)


def _dual_clip(log_prob, old_log_prob, advantage, kl, *, clip_eps, kl_beta, dual_clip_c):
    clipped = -clipped_surrogate_loss(log_prob, old_log_prob, advantage, clip_eps=clip_eps)
    return -jnp.where(advantage < 0, jnp.maximum(clipped, dual_clip_c * advantage), clipped)


class Objective(NamedTuple):
    fn: Callable
    """``fn(log_prob, old_log_prob, advantage, kl, *, clip_eps, kl_beta, dual_clip_c) -> per-sample loss``."""
    doc: str
    reference: str = ""
    reads: tuple[str, ...] = ()
    """The config fields it reads (the other objectives' fields are inert under it)."""
    uses_kl: bool = False
    """Reads KL(pi_old || pi) at each sample's state (computed only for these)."""
    adapts_beta: bool = False
    """kl_beta is adapted after every update towards kl_target (``ppo_jax.rl.adaptation``)."""


OBJECTIVES: Registry[Objective] = Registry("objective", "policy objective")
OBJECTIVES.register(
    "clip", Objective(_clip, "min(r A, clip(r, 1-eps, 1+eps) A)", "Schulman et al. 2017, eq. 7", ("clip_eps",))
)
OBJECTIVES.register(
    "clip_no_min",
    Objective(_clip_no_min, "clip(r, 1-eps, 1+eps) A", 'ablation: "why is min needed"', ("clip_eps",)),
)
OBJECTIVES.register("unclipped", Objective(_unclipped, "r A", "Schulman et al. 2017, eq. 6 (CPI)"))
OBJECTIVES.register(
    "kl_fixed",
    Objective(_kl_penalty, "r A - beta KL(pi_old || pi)", "Schulman et al. 2017, eq. 8", ("kl_beta",), True),
)
OBJECTIVES.register(
    "kl_adaptive",
    Objective(
        _kl_penalty,
        "r A - beta KL(pi_old || pi), beta adapted per update",
        "Schulman et al. 2017, sec. 4",
        ("kl_beta", "kl_target"),
        True,
        True,
    ),
)
OBJECTIVES.register(
    "dual_clip",
    Objective(
        _dual_clip,
        "clip objective; for A < 0 also bounded below by c A",
        "Ye et al. 2020, eq. 5",
        ("clip_eps", "dual_clip_c"),
    ),
)


def policy_loss(
    objective: str,
    log_prob: jax.Array,
    old_log_prob: jax.Array,
    advantage: jax.Array,
    kl: jax.Array,
    *,
    clip_eps: jax.typing.ArrayLike,
    kl_beta: jax.typing.ArrayLike,
    dual_clip_c: jax.typing.ArrayLike,
) -> jax.Array:
    """Per-sample policy loss of ``objective`` (static, a name in ``OBJECTIVES``); every array has the same shape.

    ``kl`` is KL(pi_old || pi) at the sample's state; only the KL objectives use it.
    """
    return OBJECTIVES[objective].fn(
        log_prob, old_log_prob, advantage, kl, clip_eps=clip_eps, kl_beta=kl_beta, dual_clip_c=dual_clip_c
    )


def value_loss(
    value: jax.Array,
    old_value: jax.Array,
    target: jax.Array,
    *,
    vf_clip_eps: jax.typing.ArrayLike,
    clip: bool,
) -> jax.Array:
    """Per-sample ``0.5 (V - target)^2``; with ``clip``, the max with the loss of
    ``old_value + clip(V - old_value, -eps, eps)`` (Huang et al. 2022, detail 9)."""
    loss = 0.5 * (value - target) ** 2
    if not clip:
        return loss
    clipped_value = old_value + jnp.clip(value - old_value, -vf_clip_eps, vf_clip_eps)
    return jnp.maximum(loss, 0.5 * (clipped_value - target) ** 2)
