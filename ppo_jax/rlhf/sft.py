"""Supervised fine-tuning (SFT) on demonstrations: the warm start of the policy and the reference.

Ouyang et al. (2022), sec. 3.5: the policy starts from a model fine-tuned on
demonstrations, and a frozen copy of it is the reference of the KL penalty
(Ziegler et al. 2019; Stiennon et al. 2020, sec. 3.4). Here the demonstrations
are the noisy demonstrator's (``copy_task.demonstrate``) and the loss is the mean
negative log-likelihood per response token (prompt and padding masked out).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import optax
from jax import lax

from ppo_jax.rlhf import copy_task
from ppo_jax.rlhf.models import SeqModel, response_outputs


def token_log_probs(logits: jax.Array, tokens: jax.Array) -> jax.Array:
    """``log softmax(logits)[tokens]``: logits ``[..., V]``, tokens ``[...]`` -> ``[...]``."""
    return jnp.take_along_axis(jax.nn.log_softmax(logits, -1), tokens[..., None].astype(jnp.int32), -1)[..., 0]


def masked_mean(x: jax.Array, mask: jax.Array) -> jax.Array:
    """Mean of ``x`` over the True entries of ``mask`` (same shape); masked entries get zero gradient."""
    return jnp.where(mask, x, 0.0).sum() / jnp.maximum(mask.sum(), 1)


def demonstration_nll(model: SeqModel, params, prompt: jax.Array, response: jax.Array) -> jax.Array:
    """Mean NLL per response token (EOS included, padding excluded) of ``response [B, L]`` given ``prompt [B, P]``."""
    logits = response_outputs(model, params, copy_task.join(prompt, response), prompt.shape[-1])
    return masked_mean(-token_log_probs(logits, response), copy_task.response_mask(response))


def fit(
    loss_fn: Callable[[object, jax.Array], jax.Array],
    params,
    key: jax.Array,
    *,
    steps: int,
    lr: jax.typing.ArrayLike,
) -> tuple[object, jax.Array]:
    """``steps`` Adam steps on ``loss_fn(params, key)`` (fresh synthetic data per step); returns (params, losses [steps]).

    The optimizer is built inside (its possibly traced ``lr`` injected into the
    state) and never returned, so nothing traced lands in a static slot.
    """
    tx = optax.inject_hyperparams(optax.adam)(learning_rate=lr)
    grad_fn = jax.value_and_grad(loss_fn)

    def step(carry, step_key):
        params, opt_state = carry
        loss, grads = grad_fn(params, step_key)
        updates, opt_state = tx.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state), loss

    (params, _), losses = lax.scan(step, (params, tx.init(params)), jax.random.split(key, steps))
    return params, losses


def sft(cfg, model: SeqModel, params, key: jax.Array) -> tuple[object, jax.Array]:
    """Fine-tune ``params`` on ``cfg.sft_steps`` batches of fresh demonstrations; returns (params, losses)."""

    def loss_fn(p, step_key):
        prompt_key, demo_key = jax.random.split(step_key)
        prompt = copy_task.sample_prompts(prompt_key, cfg.pretrain_batch, cfg.prompt_len, cfg.vocab_size)
        response = copy_task.demonstrate(demo_key, prompt, cfg.max_response_len, cfg.vocab_size, cfg.demo_noise)
        return demonstration_nll(model, p, prompt, response)

    return fit(loss_fn, params, key, steps=cfg.sft_steps, lr=cfg.sft_lr)
