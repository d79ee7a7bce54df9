"""The token-level PPO loss: per-token ratio, clipped surrogate, value and entropy terms on response tokens only.

Schulman et al. (2017), eq. 7 and 9, applied per response token as in Ziegler et
al. (2019) and Ouyang et al. (2022): the action is a token, ``r_t = pi(a_t|s_t) /
pi_old(a_t|s_t)``, and every term is averaged over the response tokens of the
minibatch (token-level mean). Prompt positions and padding after EOS enter
through ``jnp.where`` on the mask, so they get exactly zero gradient (also when
their values are inf or NaN).

The per-token terms reuse ``ppo_jax.losses.clipped_surrogate_loss``,
``ppo_jax.losses.value_loss`` and ``ppo_jax.distributions``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from ppo_jax import distributions
from ppo_jax.losses import clipped_surrogate_loss, value_loss
from ppo_jax.rlhf.models import SeqModel, run
from ppo_jax.rlhf.sft import masked_mean, token_log_probs


class SequenceBatch(NamedTuple):
    """Whole sequences; ``M`` sequences, ``L`` response positions."""

    sequence: jax.Array  # [M, P + L] int32, prompt then response
    mask: jax.Array  # [M, L] bool, response tokens
    log_prob: jax.Array  # [M, L] log pi_old(a_t | s_t)
    value: jax.Array  # [M, L] V_old(s_t)
    advantage: jax.Array  # [M, L]
    target: jax.Array  # [M, L] value target


def masked_explained_variance(prediction: jax.Array, target: jax.Array, mask: jax.Array) -> jax.Array:
    """1 - Var[target - prediction] / Var[target] over the masked entries; NaN if the target is constant there."""

    def var(x):
        return masked_mean((x - masked_mean(x, mask)) ** 2, mask)

    var_target = var(target)
    return jnp.where(
        var_target > 0, 1.0 - var(target - prediction) / jnp.where(var_target > 0, var_target, 1.0), jnp.nan
    )


def loss_from_outputs(
    logits: jax.Array, values: jax.Array, batch: SequenceBatch, cfg, *, prompt_len: int
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """PPO loss from the actor's logits ``[M, P + L - 1, V]`` and the critic's values ``[M, P + L - 1]``.

    Both are the models' outputs at every input position (teacher forcing on
    ``sequence[:, :-1]``); rows before ``prompt_len - 1`` predict prompt tokens
    and are unused. ``cfg`` supplies clip_eps, vf_clip_eps, clip_vloss, ent_coef,
    vf_coef, norm_adv. Returns ``(policy + vf_coef * value - ent_coef * entropy, metrics)``.
    """
    logits, values = logits[:, prompt_len - 1 :], values[:, prompt_len - 1 :]
    response, mask = batch.sequence[:, prompt_len:], batch.mask
    advantage = batch.advantage
    if cfg.norm_adv:
        centred = advantage - masked_mean(advantage, mask)
        advantage = centred / (jnp.sqrt(masked_mean(centred**2, mask)) + 1e-8)
    log_prob = token_log_probs(logits, response)
    log_ratio = log_prob - batch.log_prob
    ratio = jnp.exp(log_ratio)
    dist = distributions.PolicyDist(logits, None)
    terms = dict(
        policy_loss=clipped_surrogate_loss(log_prob, batch.log_prob, advantage, clip_eps=cfg.clip_eps),
        value_loss=value_loss(values, batch.value, batch.target, vf_clip_eps=cfg.vf_clip_eps, clip=cfg.clip_vloss),
        entropy=distributions.entropy(dist),
        approx_kl=(ratio - 1.0) - log_ratio,
        clip_fraction=(jnp.abs(ratio - 1.0) > cfg.clip_eps).astype(jnp.float32),
    )
    metrics = {name: masked_mean(term, mask) for name, term in terms.items()}
    loss = metrics["policy_loss"] + cfg.vf_coef * metrics["value_loss"] - cfg.ent_coef * metrics["entropy"]
    metrics["explained_variance"] = masked_explained_variance(values, batch.target, mask)
    return loss, metrics


def ppo_loss(params, actor: SeqModel, critic: SeqModel, batch: SequenceBatch, cfg) -> tuple[jax.Array, dict]:
    """``loss_from_outputs`` of the actor ``params["actor"]`` and critic ``params["critic"]`` on ``batch``."""
    inputs = batch.sequence[:, :-1]
    logits = run(actor, params["actor"], inputs)
    values = run(critic, params["critic"], inputs)[..., 0]
    prompt_len = batch.sequence.shape[-1] - batch.mask.shape[-1]
    return loss_from_outputs(logits, values, batch, cfg, prompt_len=prompt_len)
