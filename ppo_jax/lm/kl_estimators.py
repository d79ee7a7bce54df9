"""Where the KL to the reference goes (``KL_MODES``) and how it is estimated per token (``KL_ESTIMATORS``).

Placement (``cfg.kl_mode``): ``loss`` adds ``beta * aggregate(estimate)`` to the loss
(GRPO, Shao et al. 2024, eq. 3); ``reward`` puts ``-beta * estimate`` in each
token's reward before the advantages (Ziegler et al. 2019, eq. 2; Ouyang et al. 2022);
``none`` has no KL term.

Single-sample estimators of KL(pi || pi_ref) per token, for tokens sampled from pi.

Schulman (2020), "Approximating KL divergence" (http://joschu.net/blog/kl-approx.html).
With ``log_r = log pi_ref(a) - log pi(a)`` and ``a ~ pi``:

| estimator | value                     | E_pi[value]                                   |
|-----------|---------------------------|-----------------------------------------------|
| ``k1``      | -log_r                    | KL(pi || pi_ref): unbiased, often negative    |
| ``k2``      | log_r^2 / 2               | KL + O(log_r^3): biased, >= 0, low variance   |
| ``k3``      | exp(log_r) - 1 - log_r    | KL(pi || pi_ref): unbiased, >= 0, low variance |

``k3`` is unbiased because E_pi[exp(log_r) - 1] = sum_a pi_ref(a) - 1 = 0.

Used as a loss term (gradient through ``log_prob``, the samples held fixed), the
expected gradients differ from the values' (Tang & Munos 2025, "On a few pitfalls
in KL divergence gradient estimation for RL"): E[grad k1] = 0, E[grad k2] =
grad KL(pi || pi_ref), E[grad k3] = grad KL(pi_ref || pi). GRPO's KL loss is ``k3``
(Shao et al. 2024, eq. 4).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from ppo_jax.registry import Registry


class KlEstimator(NamedTuple):
    fn: Callable
    """``fn(log_r) -> value``, elementwise, ``log_r = log pi_ref(a) - log pi(a)``."""
    doc: str
    reference: str = "Schulman 2020"


KL_ESTIMATORS: Registry[KlEstimator] = Registry("kl_estimator", "KL estimator")
KL_ESTIMATORS.register("k1", KlEstimator(lambda log_r: -log_r, "-log_r: unbiased, often negative"))
KL_ESTIMATORS.register("k2", KlEstimator(lambda log_r: 0.5 * log_r**2, "log_r^2 / 2: biased, >= 0, low variance"))
KL_ESTIMATORS.register(
    "k3", KlEstimator(lambda log_r: jnp.expm1(log_r) - log_r, "exp(log_r) - 1 - log_r: unbiased, >= 0")
)


class KlMode(NamedTuple):
    doc: str
    reference: str = ""
    in_reward: bool = False
    """``-beta * estimate`` is added to every response token's reward."""
    in_loss: bool = False
    """``beta * estimate``, aggregated as the policy loss, is added to the loss."""
    reads: tuple[str, ...] = ()

    @property
    def active(self) -> bool:
        """There is a KL term (in the reward or the loss): beta is read (and adapted with kl_adaptive)."""
        return self.in_reward or self.in_loss


KL_FIELDS = ("beta", "kl_estimator", "kl_adaptive")
"""Fields every KL placement reads (none of them with ``kl_mode: none``)."""

KL_MODES: Registry[KlMode] = Registry("kl_mode", "KL placement")
KL_MODES.register(
    "loss", KlMode("beta x KL estimate in the loss", "Shao et al. 2024, eq. 3", in_loss=True, reads=KL_FIELDS)
)
KL_MODES.register(
    "reward", KlMode("-beta x KL estimate in each token's reward", "Ziegler et al. 2019, eq. 2", True, reads=KL_FIELDS)
)
KL_MODES.register("none", KlMode("no KL to the reference"))


def kl_estimate(log_prob: jax.Array, ref_log_prob: jax.Array, estimator: str) -> jax.Array:
    """Per-token estimate of KL(pi || pi_ref); ``log_prob``, ``ref_log_prob`` and the result share a shape.

    ``estimator`` (static) is one of ``KL_ESTIMATORS``. Gradients flow through
    ``log_prob`` (and ``ref_log_prob``, usually a constant). Mask the inputs with
    ``jnp.where`` before this call if padding may hold inf or NaN.
    """
    return KL_ESTIMATORS[estimator].fn(ref_log_prob - log_prob)


def estimator_errors(log_prob: jax.Array, ref_log_prob: jax.Array, exact_kl: jax.Array, mask: jax.Array) -> dict:
    """Each estimator's error against the exact per-token KL, on the same sampled tokens (a paired comparison).

    ``exact_kl`` [B, T]: KL(pi || pi_ref) of each position's whole next-token distributions, which k1 and k3 estimate
    without bias from the one token drawn there (Schulman 2020); ``log_prob``, ``ref_log_prob`` [B, T] of the drawn
    tokens; ``mask`` [B, T] the response tokens. Returns ``kl_<name>_bias`` (mean error) and ``kl_<name>_rmse`` (root
    mean square error: the estimator's spread around the exact value, bias included) over the masked tokens, for every
    name in ``KL_ESTIMATORS``, whichever the run uses.
    """
    count = jnp.maximum(mask.sum(), 1)
    out = {}
    for name in KL_ESTIMATORS.names():
        error = jnp.where(mask, kl_estimate(log_prob, ref_log_prob, name) - exact_kl, 0.0)
        out[f"kl_{name}_bias"] = error.sum() / count
        out[f"kl_{name}_rmse"] = jnp.sqrt((error**2).sum() / count)
    return out
