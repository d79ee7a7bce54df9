"""Per-token rewards of a response: the KL penalty on every token, the score on the last.

Ziegler et al. (2019), eq. 2; Stiennon et al. (2020), eq. 1; Ouyang et al. (2022),
eq. 2: the reward of a sequence is ``r_RM - beta * sum_t log(pi(a_t|s_t) / pi_ref(a_t|s_t))``.
Spread over tokens (as in their implementations), response token t earns
``-beta * (log pi(a_t) - log pi_ref(a_t))`` and the last response token (the EOS,
or the last one at the maximum length) also earns the sequence score ``r_RM``.
The score is placed, not broadcast: an advantage estimator (``ppo_jax.lm.advantages``)
carries it back to earlier tokens, through a critic (GAE) or the group's returns.

The end of a response is a termination (the sequence is complete and scored), not
a time-limit truncation: nothing is bootstrapped past it, and padding positions
(after the end) have reward, value, advantage and target 0.

Shapes: batch-major ``[B, L]`` (sequences x response positions); ``mask [B, L]``
is ``tokens.response_mask`` (True up to and including the first EOS).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def kl_rewards(
    log_prob: jax.Array, ref_log_prob: jax.Array, mask: jax.Array, *, beta: jax.typing.ArrayLike
) -> jax.Array:
    """``-beta * (log_prob - ref_log_prob)`` on response tokens, 0 on padding; ``[B, L]``."""
    return jnp.where(mask, -beta * (log_prob - ref_log_prob), 0.0)


def last_index(mask: jax.Array) -> jax.Array:
    """``[B]`` int32: the position of each response's last token (its EOS, or L - 1)."""
    return mask.sum(-1).astype(jnp.int32) - 1


def place_score(score: jax.Array, mask: jax.Array) -> jax.Array:
    """``[B, L]``: ``score [B]`` on each response's last token, 0 elsewhere."""
    return jax.nn.one_hot(last_index(mask), mask.shape[-1], dtype=jnp.float32) * score[:, None]


def token_rewards(
    score: jax.Array, log_prob: jax.Array, ref_log_prob: jax.Array, mask: jax.Array, *, beta: jax.typing.ArrayLike
) -> jax.Array:
    """Total reward per response token ``[B, L]``: the KL reward on every token plus the score on the last."""
    return kl_rewards(log_prob, ref_log_prob, mask, beta=beta) + place_score(score, mask)
