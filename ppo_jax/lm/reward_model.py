"""The learned reward model: a Bradley-Terry model of preferences labelled by the task's programmatic score.

The programmatic score is the problem's rule (``problems.verify``: the copy
task's share of positions right; correctness of an arithmetic answer). The
**learned reward model** is what RLHF actually optimises (Christiano et al.
2017; Stiennon et al. 2020, sec. 3.4; Ouyang et al. 2022, sec. 3.5): a model of the
run's architecture that reads prompt and response and outputs a scalar at the response's last token,
trained on synthetic preference pairs. Each pair is two demonstrations of one
prompt at independent noise levels (uniform in [0, 1]); the "labeller" prefers
a over b with probability ``sigmoid((s_a - s_b) / bt_temperature)``, ``s`` the
programmatic score. The loss is the Bradley-Terry negative log-likelihood
``-log sigmoid(r_chosen - r_rejected)``. Being a proxy fitted to demonstrator
data, it can be over-optimised (Gao et al. 2022), so runs also record the
programmatic score. ``REWARD_MODELS`` is the table of sequence scores (``cfg.reward_model``):
the programmatic one or the learned one.

Shapes: prompts ``[B, P]``, responses ``[B, L]``, scores ``[B]`` float32.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp

from ppo_jax.lm import problems, tokens
from ppo_jax.lm.models import run, score_at
from ppo_jax.lm.sft import fit
from ppo_jax.lm.verifier import verifiable_reward
from ppo_jax.registry import Registry


def learned_score(model: nn.Module, params, prompt: jax.Array, response: jax.Array) -> jax.Array:
    """The reward model's scalar at the response's last token (EOS, or the last one at the maximum length); ``[B]``."""
    outputs = run(model, params, tokens.join(prompt, response))
    return score_at(outputs, prompt.shape[-1] + tokens.response_length(response) - 1)


class PreferencePairs(NamedTuple):
    prompt: jax.Array  # [B, P]
    response_a: jax.Array  # [B, L]
    response_b: jax.Array  # [B, L]
    a_preferred: jax.Array  # [B] float32, 1 where the labeller chose a


def preference_pairs(key: jax.Array, cfg, num: int) -> PreferencePairs:
    """``num`` synthetic comparisons labelled by a noisy Bradley-Terry labeller (see the module docstring)."""
    prompt_key, noise_key, a_key, b_key, label_key = jax.random.split(key, 5)
    prompt = problems.sample_prompts(cfg, prompt_key, num)
    noise = jax.random.uniform(noise_key, (2, num, 1))
    response_a = problems.demonstrate(cfg, a_key, prompt, noise[0])
    response_b = problems.demonstrate(cfg, b_key, prompt, noise[1])
    margin = problems.verify(cfg, prompt, response_a).score - problems.verify(cfg, prompt, response_b).score
    a_preferred = jax.random.bernoulli(label_key, jax.nn.sigmoid(margin / cfg.bt_temperature))
    return PreferencePairs(prompt, response_a, response_b, a_preferred.astype(jnp.float32))


def bradley_terry_loss(score_a: jax.Array, score_b: jax.Array, a_preferred: jax.Array) -> jax.Array:
    """Mean of ``-log sigmoid(r_chosen - r_rejected)`` over pairs; all ``[B]``."""
    margin = jnp.where(a_preferred > 0.5, score_a - score_b, score_b - score_a)
    return -jax.nn.log_sigmoid(margin).mean()


def train_reward_model(cfg, model: nn.Module, params, key: jax.Array) -> tuple[object, jax.Array]:
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


class RewardSource(NamedTuple):
    score: Callable
    """``score(cfg, model, params, prompt [B, P], response [B, L], verdict) -> [B]``: the sequence score before the
    overlong punishment (``model``, ``params``: the scalar model and the trained reward model's parameters)."""
    trained: bool
    """A reward model is trained in pretraining (``train_reward_model``)."""
    doc: str
    reference: str = ""
    reads: tuple[str, ...] = ()


def _programmatic(cfg, model, params, prompt, response, verdict):
    return verifiable_reward(verdict.score, verdict.well_formed, format_reward=cfg.format_reward)


def _learned(cfg, model, params, prompt, response, verdict):
    return learned_score(model, params, prompt, response)


REWARD_MODELS: Registry[RewardSource] = Registry("reward_model", "reward model")
REWARD_MODELS.register(
    "programmatic",
    RewardSource(
        _programmatic,
        False,
        "the problem's verifier (+ format reward)",
        "Guo et al. 2025 (DeepSeek-R1), sec. 2.2.2",
        ("format_reward",),
    ),
)
REWARD_MODELS.register(
    "learned",
    RewardSource(
        _learned,
        True,
        "a Bradley-Terry model of the verifier's noisy preferences",
        "Christiano et al. 2017; Ouyang et al. 2022",
        ("rm_steps", "rm_lr", "bt_temperature"),
    ),
)
