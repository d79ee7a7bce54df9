"""Sequence-level scores: the task's programmatic scorer and a Bradley-Terry reward model trained on it.

The **programmatic scorer** is transparent: the share of the intended response's
``P + 1`` positions (the prompt, then EOS) that the response gets right.

The **learned reward model** is what RLHF actually optimises (Christiano et al.
2017; Stiennon et al. 2020, sec. 3.4; Ouyang et al. 2022, sec. 3.5): a GRU that
reads prompt and response and outputs a scalar at the response's last token,
trained on synthetic preference pairs. Each pair is two demonstrations of one
prompt at independent noise levels (uniform in [0, 1]); the "labeller" prefers
a over b with probability ``sigmoid((s_a - s_b) / bt_temperature)``, ``s`` the
programmatic score. The loss is the Bradley-Terry negative log-likelihood
``-log sigmoid(r_chosen - r_rejected)``. Being a proxy fitted to demonstrator
data, it can be over-optimised (Gao et al. 2022), so runs also record the
programmatic score.

Shapes: prompts ``[B, P]``, responses ``[B, L]``, scores ``[B]`` float32.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from ppo_jax.rlhf import copy_task
from ppo_jax.rlhf.models import SeqModel, run, score_at
from ppo_jax.rlhf.sft import fit


def programmatic_score(prompt: jax.Array, response: jax.Array) -> jax.Array:
    """Share of the ``P + 1`` positions of the intended response (prompt, EOS) that ``response`` matches; ``[B]`` in [0, 1]."""
    prompt_len = prompt.shape[-1]
    target = copy_task.target_response(prompt, response.shape[-1])
    return (response[..., : prompt_len + 1] == target[..., : prompt_len + 1]).mean(-1).astype(jnp.float32)


def learned_score(model: SeqModel, params, prompt: jax.Array, response: jax.Array) -> jax.Array:
    """The reward model's scalar at the response's last token (EOS, or the last one at the maximum length); ``[B]``."""
    outputs = run(model, params, copy_task.join(prompt, response))
    return score_at(outputs, prompt.shape[-1] + copy_task.response_length(response) - 1)


class PreferencePairs(NamedTuple):
    prompt: jax.Array  # [B, P]
    response_a: jax.Array  # [B, L]
    response_b: jax.Array  # [B, L]
    a_preferred: jax.Array  # [B] float32, 1 where the labeller chose a


def preference_pairs(key: jax.Array, cfg, num: int) -> PreferencePairs:
    """``num`` synthetic comparisons labelled by a noisy Bradley-Terry labeller (see the module docstring)."""
    prompt_key, noise_key, a_key, b_key, label_key = jax.random.split(key, 5)
    prompt = copy_task.sample_prompts(prompt_key, num, cfg.prompt_len, cfg.vocab_size)
    noise = jax.random.uniform(noise_key, (2, num, 1))
    response_a = copy_task.demonstrate(a_key, prompt, cfg.max_response_len, cfg.vocab_size, noise[0])
    response_b = copy_task.demonstrate(b_key, prompt, cfg.max_response_len, cfg.vocab_size, noise[1])
    margin = programmatic_score(prompt, response_a) - programmatic_score(prompt, response_b)
    a_preferred = jax.random.bernoulli(label_key, jax.nn.sigmoid(margin / cfg.bt_temperature))
    return PreferencePairs(prompt, response_a, response_b, a_preferred.astype(jnp.float32))


def bradley_terry_loss(score_a: jax.Array, score_b: jax.Array, a_preferred: jax.Array) -> jax.Array:
    """Mean of ``-log sigmoid(r_chosen - r_rejected)`` over pairs; all ``[B]``."""
    margin = jnp.where(a_preferred > 0.5, score_a - score_b, score_b - score_a)
    return -jax.nn.log_sigmoid(margin).mean()


def train_reward_model(cfg, model: SeqModel, params, key: jax.Array) -> tuple[object, jax.Array]:
    """``cfg.rm_steps`` Adam steps on fresh preference pairs; returns (params, losses [rm_steps])."""

    def loss_fn(p, step_key):
        pairs = preference_pairs(step_key, cfg, cfg.pretrain_batch)
        return bradley_terry_loss(
            learned_score(model, p, pairs.prompt, pairs.response_a),
            learned_score(model, p, pairs.prompt, pairs.response_b),
            pairs.a_preferred,
        )

    return fit(loss_fn, params, key, steps=cfg.rm_steps, lr=cfg.rm_lr)


def pairwise_accuracy(pred_a: jax.Array, pred_b: jax.Array, true_a: jax.Array, true_b: jax.Array) -> jax.Array:
    """Share of pairs with different true scores that the predicted scores order the same way (ties count half)."""
    decided = true_a != true_b
    agree = jnp.where(
        pred_a == pred_b, 0.5, (jnp.sign(pred_a - pred_b) == jnp.sign(true_a - true_b)).astype(jnp.float32)
    )
    return jnp.where(decided, agree, 0.0).sum() / jnp.maximum(decided.sum(), 1)
