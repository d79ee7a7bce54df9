"""Token sampling with temperature, top-k and top-p, and the log-probabilities of the distribution actually sampled.

An RL loss on sampled tokens needs the log-probability the behaviour policy gave
each token. When tokens are drawn from a tempered, truncated distribution, that
log-probability is the one of the tempered, truncated distribution, not
``log_softmax(logits)``: taking the raw softmax silently biases the ratio and the
KL. ``sampling_log_probs`` is that distribution, ``sample`` draws from it and
returns the drawn token's log-probability under it, ``token_log_prob`` recomputes
it for given tokens (what the loss does later) and ``entropy`` is its entropy.
The lab's rollouts, loss, KL and entropy all use this one distribution
(``LmConfig.temperature``, ``top_k``, ``top_p``).

The warpers run in transformers' default order for ``generate``: temperature,
then top-k (Fan et al. 2018, "Hierarchical neural story generation"), then top-p
(Holtzman et al. 2020, "The curious case of neural text degeneration"), each with
the semantics of transformers' ``TemperatureLogitsWarper``, ``TopKLogitsWarper``
and ``TopPLogitsWarper`` (``min_tokens_to_keep=1``).

Every knob is a traced array (``SamplingParams``), so one compilation serves a
sweep that vmaps over them: top-k sorts and reads the k-th largest logit instead
of calling ``lax.top_k`` with a static k.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax
from jax.typing import ArrayLike


class SamplingParams(NamedTuple):
    """The knobs of token sampling, each a scalar array (vmap over a batch of them for a sweep).

    Attributes:
        temperature: float32, >= 0; the logits are divided by it; 0 means greedy (argmax).
        top_k: int32; keep the k most probable tokens (and tokens tied with the k-th); 0 (or less) means off.
        top_p: float32 in (0, 1]; nucleus sampling; 1.0 (or more) means off.
    """

    temperature: jax.Array
    top_k: jax.Array
    top_p: jax.Array


def sampling_params(temperature: ArrayLike = 1.0, top_k: ArrayLike = 0, top_p: ArrayLike = 1.0) -> SamplingParams:
    """``SamplingParams`` with float32 temperature and top_p, int32 top_k; the defaults sample from the raw softmax."""
    return SamplingParams(
        jnp.asarray(temperature, jnp.float32), jnp.asarray(top_k, jnp.int32), jnp.asarray(top_p, jnp.float32)
    )


def tempered(logits: jax.Array, params: SamplingParams) -> jax.Array:
    """``logits [..., V] / temperature`` in float32 (temperature 0: the logits unchanged)."""
    return logits.astype(jnp.float32) / jnp.where(params.temperature <= 0, 1.0, params.temperature)


def _kept_logits(logits: jax.Array, params: SamplingParams) -> jax.Array:
    """``[..., V]`` float32: the tempered logits of the tokens top-k and top-p keep, -inf elsewhere (see below).

    With every knob off they are ``logits`` cast to float32, bit for bit (so a draw
    from them is the draw from the raw logits).
    """
    # The sorts cost more than the rest of a decoding step on a CPU: skip them when nothing truncates (under a
    # vmap over the knobs the branch becomes a select, and both run).
    truncates = (params.top_k > 0) | (params.top_p < 1)
    return lax.cond(truncates, _truncated, lambda scaled, params: scaled, tempered(logits, params), params)


def _truncated(tempered: jax.Array, params: SamplingParams) -> jax.Array:
    """Top-k, then top-p, of the tempered logits ``[..., V]``: -inf on the tokens they drop."""
    vocab = tempered.shape[-1]
    kth_largest = jnp.take(jnp.sort(tempered, axis=-1), vocab - jnp.clip(params.top_k, 1, vocab), axis=-1)
    top_k_logits = jnp.where((params.top_k <= 0) | (tempered >= kth_largest[..., None]), tempered, -jnp.inf)

    order = jnp.argsort(top_k_logits, axis=-1, stable=True)
    ascending = jnp.take_along_axis(top_k_logits, order, axis=-1)
    removed_sorted = jnp.cumsum(jax.nn.softmax(ascending, axis=-1), axis=-1) <= 1 - params.top_p
    removed_sorted = removed_sorted.at[..., -1].set(False)
    removed = jnp.take_along_axis(removed_sorted, jnp.argsort(order, axis=-1), axis=-1)
    return jnp.where((params.top_p < 1) & removed, -jnp.inf, top_k_logits)


def sampling_log_probs(logits: jax.Array, params: SamplingParams) -> jax.Array:
    """Log-probabilities ``[..., V]`` (float32) of the distribution ``sample`` draws tokens from.

    In float32 whatever the dtype of ``logits [..., V]``: ``logits / temperature``,
    then top-k keeps every token whose tempered logit is >= the k-th largest (ties
    kept; k >= V keeps all), then top-p sorts the top-k distribution ascending
    (stable sort: among equal tokens the lower index comes first) and removes the
    tokens whose cumulative probability is <= 1 - top_p, always keeping the most
    probable: the smallest set of most probable tokens whose probability reaches
    top_p. The kept set is renormalised; every other token gets -inf.

    At temperature 0 (greedy) it is the one-hot distribution of ``argmax(logits)``
    (the first index among ties): 0 there, -inf elsewhere; top-k and top-p are
    then ignored.
    """
    one_hot = jnp.arange(logits.shape[-1]) == jnp.argmax(logits, axis=-1, keepdims=True)
    log_probs = jax.nn.log_softmax(_kept_logits(logits, params), axis=-1)
    return jnp.where(params.temperature <= 0, jnp.where(one_hot, 0.0, -jnp.inf), log_probs)


def token_log_prob(logits: jax.Array, token: jax.Array, params: SamplingParams) -> jax.Array:
    """Log-probability ``[...]`` (float32) of ``token [...]`` under the sampling distribution of ``logits [..., V]``.

    The kept set is top-k's and top-p's together with ``token`` itself, so the value
    is finite for every token. For a token ``sample`` drew from these logits it is
    exactly the log-probability it was drawn with (the token was kept); for a token
    the truncation would now drop (the policy moved since it sampled, or the logits
    differ in the last bits from the sampler's) it is the probability of that token
    renormalised over the kept set and itself, instead of -inf, which would make
    the ratio 0 and the KL estimators infinite. Differentiable in the logits: the
    gradient is (1[j = token] - p_j) / temperature on the kept tokens j, 0 elsewhere.
    At temperature 0 (greedy): 0 for ``argmax(logits)``, -inf for any other token.
    """
    scaled = tempered(logits, params)
    is_token = jnp.arange(logits.shape[-1]) == token[..., None]
    kept = jnp.where(is_token, scaled, _kept_logits(logits, params))
    log_prob = jnp.take_along_axis(jax.nn.log_softmax(kept, axis=-1), token[..., None].astype(jnp.int32), axis=-1)
    greedy_log_prob = jnp.where(token == jnp.argmax(logits, axis=-1), 0.0, -jnp.inf)
    return jnp.where(params.temperature <= 0, greedy_log_prob, log_prob[..., 0])


def entropy(logits: jax.Array, params: SamplingParams) -> jax.Array:
    """Entropy ``[...]`` (nats, float32) of the sampling distribution of ``logits [..., V]`` (0 at temperature 0).

    The dropped tokens contribute 0 (and 0 gradient): ``-sum_j p_j log p_j`` over the kept set.
    """
    log_probs = jax.nn.log_softmax(_kept_logits(logits, params), axis=-1)
    finite = jnp.where(log_probs > -jnp.inf, log_probs, 0.0)  # exp(-inf) * -inf would be NaN
    return jnp.where(params.temperature <= 0, 0.0, -jnp.sum(jnp.exp(log_probs) * finite, axis=-1))


def sample(key: jax.Array, logits: jax.Array, params: SamplingParams) -> tuple[jax.Array, jax.Array]:
    """Draw ``token [...]`` (int32) from ``sampling_log_probs(logits [..., V], params)``, with its log-prob ``[...]``.

    The log-prob (float32) is the drawn token's under the distribution it was drawn
    from, ``token_log_prob(logits, token, params)``. The draw is
    ``jax.random.categorical`` on the kept tempered logits, so with every knob off it
    is the draw from the raw logits, bit for bit. At temperature 0 the token is
    ``argmax(logits)`` and its log-prob is 0.
    """
    drawn = jax.random.categorical(key, _kept_logits(logits, params), axis=-1)
    token = jnp.where(params.temperature <= 0, jnp.argmax(logits, axis=-1), drawn).astype(jnp.int32)
    return token, token_log_prob(logits, token, params)
