"""Single-sample estimators of KL(pi || pi_ref) per token, for tokens sampled from pi.

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

import jax
import jax.numpy as jnp

KL_ESTIMATORS = ("k1", "k2", "k3")


def kl_estimate(log_prob: jax.Array, ref_log_prob: jax.Array, estimator: str) -> jax.Array:
    """Per-token estimate of KL(pi || pi_ref); ``log_prob``, ``ref_log_prob`` and the result share a shape.

    ``estimator`` (static) is one of ``KL_ESTIMATORS``. Gradients flow through
    ``log_prob`` (and ``ref_log_prob``, usually a constant). Mask the inputs with
    ``jnp.where`` before this call if padding may hold inf or NaN.
    """
    log_r = ref_log_prob - log_prob
    if estimator == "k1":
        return -log_r
    if estimator == "k2":
        return 0.5 * log_r**2
    if estimator == "k3":
        return jnp.expm1(log_r) - log_r
    raise ValueError(f"unknown KL estimator {estimator!r}; expected one of {KL_ESTIMATORS}")
