"""Supervised fine-tuning (SFT) on demonstrations: the warm start of the policy and the reference.

Ouyang et al. (2022), sec. 3.5: the policy starts from a model fine-tuned on
demonstrations, and a frozen copy of it is the reference of the KL penalty
(Ziegler et al. 2019; Stiennon et al. 2020, sec. 3.4). Here the demonstrations
are the problem's (``problems.demonstrate``, each token replaced with
probability ``demo_noise``) and the loss is the mean negative log-likelihood per
response token (prompt and padding masked out).

RL needs a start whose sampled answers are sometimes right and sometimes wrong
(a group of equal rewards carries no signal), and SFT on a clean task jumps from
mostly wrong to almost always right within a few hundred steps. So SFT checks
the sampled pass@1 of fresh prompts (temperature 1, no truncation: the SFT
model's own distribution, whatever the rollout knobs) every ``sft_eval_every`` steps and stops at
the first check that reaches ``sft_target_accuracy`` (above 1: never; all
``sft_steps`` run): a ``lax.while_loop`` over checks, so the steps after it cost nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax
from jax import lax

from ppo_jax.lm import problems, tokens
from ppo_jax.lm.models import response_outputs
from ppo_jax.lm.pass_rates import sampled_correct
from ppo_jax.lm.sampling import sampling_params
from ppo_jax.lm.token_math import masked_mean, token_log_probs


class SftResult(NamedTuple):
    params: dict
    loss: jax.Array  # [sft_steps] NLL per response token; NaN after the stop
    accuracy: jax.Array  # [ceil(sft_steps / sft_eval_every)] sampled pass@1 at each check; NaN after the stop
    steps: jax.Array  # int32: the steps taken


def demonstration_nll(model: nn.Module, params, prompt: jax.Array, response: jax.Array) -> jax.Array:
    """Mean NLL per response token (EOS included, padding excluded) of ``response [B, L]`` given ``prompt [B, P]``."""
    logits = response_outputs(model, params, tokens.join(prompt, response), prompt.shape[-1])
    return masked_mean(-token_log_probs(logits, response), tokens.response_mask(response))


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


def sft(cfg, model: nn.Module, params, key: jax.Array) -> SftResult:
    """Fine-tune ``params`` on batches of fresh demonstrations until the target accuracy or ``cfg.sft_steps``."""
    tx = optax.inject_hyperparams(optax.adam)(learning_rate=cfg.sft_lr)

    def loss_fn(p, step_key):
        prompt_key, demo_key = jax.random.split(step_key)
        prompt = problems.sample_prompts(cfg, prompt_key, cfg.pretrain_batch)
        response = problems.demonstrate(cfg, demo_key, prompt, cfg.demo_noise)
        return demonstration_nll(model, p, prompt, response)

    grad_fn = jax.value_and_grad(loss_fn)

    def step(carry, xs):
        params, opt_state = carry
        step_key, active = xs  # active: False for the padding steps past sft_steps
        loss, grads = grad_fn(params, step_key)
        updates, new_opt_state = tx.update(grads, opt_state, params)
        new = (optax.apply_updates(params, updates), new_opt_state)
        carry = jax.tree.map(lambda old, n: jnp.where(active, n, old), (params, opt_state), new)
        return carry, jnp.where(active, loss, jnp.nan)

    every = cfg.sft_eval_every
    checks = -(-cfg.sft_steps // every)  # the last check may cover fewer steps
    if checks == 0:  # sft_steps 0: the fresh model is the start and the reference
        return SftResult(params, jnp.zeros((0,), jnp.float32), jnp.zeros((0,), jnp.float32), jnp.int32(0))
    step_keys = jnp.concatenate(
        [
            jax.random.split(key, cfg.sft_steps),
            jax.random.split(jax.random.fold_in(key, 2), checks * every - cfg.sft_steps),
        ]
    ).reshape((checks, every))
    active = (jnp.arange(checks * every) < cfg.sft_steps).reshape((checks, every))
    check_keys = jax.random.split(jax.random.fold_in(key, 1), checks)
    raw = sampling_params()  # the SFT model's own distribution: the check is of what SFT learned

    def check(state):
        index, params, opt_state, _, losses, accuracy = state
        (params, opt_state), chunk = lax.scan(step, (params, opt_state), (step_keys[index], active[index]))
        correct = sampled_correct(cfg, model, params, check_keys[index], cfg.pretrain_batch, 1, raw).mean()
        losses, accuracy = losses.at[index].set(chunk), accuracy.at[index].set(correct)
        return index + 1, params, opt_state, correct >= cfg.sft_target_accuracy, losses, accuracy

    def go_on(state):
        index, _, _, reached, _, _ = state
        return (index < checks) & ~reached

    nan = jnp.full((checks, every), jnp.nan, jnp.float32)
    start = (jnp.int32(0), params, tx.init(params), jnp.array(False), nan, nan[:, 0])
    index, params, _, _, losses, accuracy = lax.while_loop(go_on, check, start)
    return SftResult(params, losses.reshape(-1)[: cfg.sft_steps], accuracy, jnp.minimum(index * every, cfg.sft_steps))
