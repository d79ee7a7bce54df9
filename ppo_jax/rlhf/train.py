"""``pretrain(cfg, key)`` and ``train(cfg, key, pretrained)``: RLHF on the copy task as pure, jittable functions.

This module is the engine of the RLHF ``Task`` (``ppo_jax.rlhf.task``): ``check``,
``prepare_shared`` (= ``pretrain``), ``train`` (= ``init``, ``step`` over the updates, ``finish``;
a segmented run, ``ppo_jax.segments``, calls those itself), ``evaluate`` and ``params_tree``.

    pre = jax.jit(pretrain)(cfg, key)                                  # SFT + reward model, once
    out = jax.jit(train)(cfg, key, pre)                                # one PPO run
    out = jax.jit(jax.vmap(train, in_axes=(None, 0, None)))(cfg, keys, pre)   # seeds, one program
    out = jax.jit(jax.vmap(train, in_axes=(0, 0, None)))(stacked, keys, pre)  # settings x seeds
    out = jax.jit(train)(cfg, key)                                     # pretraining included

Each update (Ziegler et al. 2019; Stiennon et al. 2020; Ouyang et al. 2022):
sample ``num_prompts`` prompts; the actor writes a response to each; the reference
and the actor give per-token log-probs, the critic per-token values, the reward
model a score per sequence; ``rewards.token_rewards`` and ``rewards.advantages``
turn them into per-token advantages and value targets; then ``update_epochs``
passes of shuffled minibatches of whole sequences minimise ``token_loss.ppo_loss``
(``ppo_jax.minibatch_epochs``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
from flax.training.train_state import TrainState
from jax import lax

from ppo_jax import distributions, threefry_cpu
from ppo_jax.final_values import NON_FINITE
from ppo_jax.minibatch_epochs import minibatch_epochs
from ppo_jax.optimizer import create_train_state, set_hyperparams
from ppo_jax.rlhf import copy_task
from ppo_jax.rlhf.config import RlhfConfig, validate
from ppo_jax.rlhf.models import SeqModel, generate, init_params, run
from ppo_jax.rlhf.reward_model import learned_score, programmatic_score, train_reward_model
from ppo_jax.rlhf.rewards import advantages, token_rewards
from ppo_jax.rlhf.sft import masked_mean, sft, token_log_probs
from ppo_jax.rlhf.task import METRIC_NAMES
from ppo_jax.rlhf.token_loss import SequenceBatch, ppo_loss
from ppo_jax.scan_updates import scan_updates
from ppo_jax.schedules import scheduled

threefry_cpu.install()  # the same random bits, a faster program on the CPU


class Models(NamedTuple):
    policy: SeqModel  # actor and reference: logits [V]
    scalar: SeqModel  # critic and reward model: one output


class Pretrained(NamedTuple):
    """The frozen models shared by PPO runs, and their training curves."""

    sft: dict  # the reference, and the actor's initial parameters
    reward_model: dict  # unused with reward_model="programmatic"
    sft_loss: jax.Array  # [sft_steps] NLL per response token
    rm_loss: jax.Array  # [rm_steps] Bradley-Terry loss


class RlhfOutput(NamedTuple):
    """``params = {"actor", "critic"}`` after training; ``metrics[name]`` is ``[num_updates]`` (see METRIC_NAMES)."""

    params: dict
    metrics: dict[str, jax.Array]


def make_models(cfg: RlhfConfig) -> Models:
    sizes = dict(vocab_size=cfg.vocab_size, embed_dim=cfg.embed_dim, hidden_dim=cfg.hidden_dim)
    return Models(policy=SeqModel(out_dim=cfg.vocab_size, head_gain=0.01, **sizes), scalar=SeqModel(out_dim=1, **sizes))


def pretrain(cfg: RlhfConfig, key: jax.Array) -> Pretrained:
    """SFT of a fresh policy on demonstrations, and (reward_model="learned") the Bradley-Terry reward model."""
    validate(cfg)
    models = make_models(cfg)
    policy_key, sft_key, rm_init_key, rm_key = jax.random.split(key, 4)
    sft_params, sft_loss = sft(cfg, models.policy, init_params(models.policy, policy_key), sft_key)
    rm_params = init_params(models.scalar, rm_init_key)
    rm_loss = jnp.zeros((0,), jnp.float32)
    if cfg.reward_model == "learned":
        rm_params, rm_loss = train_reward_model(cfg, models.scalar, rm_params, rm_key)
    return Pretrained(sft_params, rm_params, sft_loss, rm_loss)


def rollout(
    cfg: RlhfConfig, models: Models, params: dict, pretrained: Pretrained, key: jax.Array
) -> tuple[SequenceBatch, dict[str, jax.Array]]:
    """Generate, score and compute advantages for ``num_prompts`` fresh prompts; returns the batch and rollout metrics."""
    prompt_key, sample_key = jax.random.split(key)
    prompt = copy_task.sample_prompts(prompt_key, cfg.num_prompts, cfg.prompt_len, cfg.vocab_size)
    response = generate(models.policy, params["actor"], sample_key, prompt, cfg.max_response_len)
    sequence, mask = copy_task.join(prompt, response), copy_task.response_mask(response)
    inputs, start = sequence[:, :-1], cfg.prompt_len - 1
    logits = run(models.policy, params["actor"], inputs)[:, start:]
    ref_logits = run(models.policy, pretrained.sft, inputs)[:, start:]
    values = run(models.scalar, params["critic"], inputs)[:, start:, 0]
    log_prob, ref_log_prob = token_log_probs(logits, response), token_log_probs(ref_logits, response)

    true_score = programmatic_score(prompt, response)
    if cfg.reward_model == "learned":
        score = learned_score(models.scalar, pretrained.reward_model, prompt, response)
    else:
        score = true_score
    rewards = token_rewards(score, log_prob, ref_log_prob, mask, beta=cfg.beta)
    adv, targets = advantages(rewards, values, mask, gamma=cfg.gamma, gae_lambda=cfg.gae_lambda, mode=cfg.advantage)

    exact_kl = distributions.kl_divergence(
        distributions.PolicyDist(logits, None), distributions.PolicyDist(ref_logits, None)
    )
    metrics = {
        "score": score.mean(),
        "true_score": true_score.mean(),
        "kl_ref": jnp.where(mask, exact_kl, 0.0).sum(-1).mean(),
        "kl_ref_sample": jnp.where(mask, log_prob - ref_log_prob, 0.0).sum(-1).mean(),
        "response_length": mask.sum(-1).mean(dtype=jnp.float32),
        "eos_fraction": (response == copy_task.EOS).any(-1).mean(dtype=jnp.float32),
        "entropy": masked_mean(distributions.entropy(distributions.PolicyDist(logits, None)), mask),
        "total_reward": rewards.sum(-1).mean(),
    }
    batch = SequenceBatch(sequence, mask, log_prob, jnp.where(mask, values, 0.0), adv, targets)
    return jax.tree.map(lax.stop_gradient, batch), metrics


def update(
    train_state: TrainState, models: Models, batch: SequenceBatch, cfg: RlhfConfig, key: jax.Array
) -> tuple[TrainState, dict[str, jax.Array]]:
    """``update_epochs`` passes of ``num_minibatches`` shuffled minibatches of whole sequences; mean loss metrics."""
    train_state, metrics = minibatch_epochs(
        train_state,
        batch,
        lambda params, minibatch: ppo_loss(params, models.policy, models.scalar, minibatch, cfg),
        key,
        num_minibatches=cfg.num_minibatches,
        update_epochs=cfg.update_epochs,
    )
    metrics.pop("update_fraction")  # no early stopping here
    return train_state, metrics


def train(
    cfg: RlhfConfig,
    key: jax.Array,
    pretrained: Pretrained | None = None,
    *,
    on_update: Callable | None = None,
    report_every: int = 1,
) -> RlhfOutput:
    """Token-level PPO from the SFT model for ``cfg.num_updates`` updates.

    Args:
      cfg: the configuration; its float leaves may be traced (and vmapped).
      key: a PRNG key (the critic's initialization, prompts, sampling, shuffling).
      pretrained: the output of ``pretrain`` (shared by every run it is given to);
        if None, ``pretrain`` runs first with a key split from ``key``.
      on_update: ``on_update(update_idx, metrics)`` on the host after every update
        (``jax.debug.callback``; under ``vmap`` once per run); None: no callback.
      report_every: call ``on_update`` only after every ``report_every``-th update and the last.

    Returns:
      ``RlhfOutput(params, metrics)``, ``metrics[name]`` of shape ``[num_updates]``.
    """
    if pretrained is None:
        pretrain_key, key = jax.random.split(key)
        pretrained = pretrain(cfg, pretrain_key)
    carry = init(cfg, key, pretrained)
    carry, metrics = scan_updates(
        lambda c, u: step(cfg, c, u, pretrained),
        carry,
        0,
        cfg.num_updates,
        num_updates=cfg.num_updates,
        on_update=on_update,
        report_every=report_every,
    )
    return finish(cfg, carry, metrics)


class Carry(NamedTuple):
    """The training state between updates."""

    train_state: TrainState
    key: jax.Array


def init(cfg: RlhfConfig, key: jax.Array, shared: Pretrained) -> Carry:
    """Actor from the SFT model, a fresh critic, the optimizer (``validate(cfg)`` first)."""
    validate(cfg)
    models = make_models(cfg)
    critic_key, key = jax.random.split(key)
    params = {"actor": shared.sft, "critic": init_params(models.scalar, critic_key)}
    return Carry(create_train_state(models.policy.apply, params, cfg), key)


def step(cfg: RlhfConfig, carry: Carry, update_idx: jax.Array, shared: Pretrained) -> tuple[Carry, dict]:
    """One update: a rollout of fresh prompts, rewards and advantages, epochs of minibatch updates."""
    models = make_models(cfg)
    train_state, key = carry
    rollout_key, update_key, key = jax.random.split(key, 3)
    learning_rate = scheduled(cfg.lr_schedule, cfg.lr, update_idx, cfg.num_updates)
    train_state = set_hyperparams(train_state, learning_rate=learning_rate)
    batch, metrics = rollout(cfg, models, train_state.params, shared, rollout_key)
    train_state, loss_metrics = update(train_state, models, batch, cfg, update_key)
    metrics = {**metrics, **loss_metrics, "learning_rate": jnp.asarray(learning_rate, jnp.float32)}
    return Carry(train_state, key), {name: metrics[name] for name in METRIC_NAMES if name != NON_FINITE}


def finish(cfg: RlhfConfig, carry: Carry, metrics: dict) -> RlhfOutput:
    """The run's output: the trained actor and critic, and its metrics (``{}`` when they went to disk)."""
    return RlhfOutput(carry.train_state.params, metrics)


# ----------------------------------------------------------------------------- the Task engine


check = validate
"""Everything that can be wrong with an RlhfConfig, before anything compiles."""


prepare_shared = pretrain
"""What RLHF runs share: the SFT model (reference and initial actor) and the reward model."""


def describe_shared(cfg: RlhfConfig, shared: Pretrained) -> dict[str, float]:
    """Final pretraining losses: SFT NLL per response token and the reward model's Bradley-Terry loss (last 50 steps)."""
    out = {}
    if cfg.sft_steps:
        out["sft_nll_per_token"] = float(jnp.mean(shared.sft_loss[-50:]))
    if cfg.reward_model == "learned" and cfg.rm_steps:
        out["reward_model_bt_loss"] = float(jnp.mean(shared.rm_loss[-50:]))
    return out


def evaluate(cfg: RlhfConfig, output: RlhfOutput, key: jax.Array) -> dict:
    """No separate evaluation: every update already scores fresh prompts with the programmatic scorer."""
    return {}


def params_tree(output: RlhfOutput, shared: Pretrained) -> dict:
    """What params.msgpack holds: the trained actor and critic, the reference (SFT) and the reward model."""
    return {**output.params, "reference": shared.sft, "reward_model": shared.reward_model}
