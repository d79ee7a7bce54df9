"""``pretrain(cfg, key)`` and ``train(cfg, key, pretrained)``: RLHF on the sequence task as pure, jittable functions.

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
passes of shuffled minibatches of whole sequences minimise ``loss.ppo_loss``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax
from flax.training.train_state import TrainState
from jax import lax

from ppo_jax import distributions
from ppo_jax.rlhf import task
from ppo_jax.rlhf.config import RlhfConfig, validate
from ppo_jax.rlhf.loss import SequenceBatch, ppo_loss
from ppo_jax.rlhf.models import SeqModel, generate, init_params, run
from ppo_jax.rlhf.reward_model import learned_score, programmatic_score, train_reward_model
from ppo_jax.rlhf.rewards import advantages, token_rewards
from ppo_jax.rlhf.sft import masked_mean, sft, token_log_probs
from ppo_jax.update import make_optimizer, set_hyperparams

METRIC_NAMES = (
    "score",
    "true_score",
    "kl_ref",
    "kl_ref_sample",
    "response_length",
    "eos_fraction",
    "entropy",
    "total_reward",
    "policy_loss",
    "value_loss",
    "approx_kl",
    "clip_fraction",
    "explained_variance",
    "grad_norm",
    "loss",
)
"""Per-update metrics, each the mean over the update's sequences (rollout) or its minibatch steps (loss terms):
score (the reward model's, or the programmatic one), true_score (programmatic), kl_ref (sum over response tokens
of the exact KL(pi || pi_ref) per state), kl_ref_sample (sum of log pi - log pi_ref at the sampled tokens: the
quantity in the reward), response_length (tokens, EOS included), eos_fraction, entropy (per response token),
total_reward (score - beta * kl_ref_sample), then the PPO loss terms per response token."""


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
    prompt = task.sample_prompts(prompt_key, cfg.num_prompts, cfg.prompt_len, cfg.vocab_size)
    response = generate(models.policy, params["actor"], sample_key, prompt, cfg.max_response_len)
    sequence, mask = task.join(prompt, response), task.response_mask(response)
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

    exact_kl = distributions.kl_divergence(distributions.PolicyDist(logits, None), distributions.PolicyDist(ref_logits, None))
    metrics = {
        "score": score.mean(),
        "true_score": true_score.mean(),
        "kl_ref": jnp.where(mask, exact_kl, 0.0).sum(-1).mean(),
        "kl_ref_sample": jnp.where(mask, log_prob - ref_log_prob, 0.0).sum(-1).mean(),
        "response_length": mask.sum(-1).mean(dtype=jnp.float32),
        "eos_fraction": (response == task.EOS).any(-1).mean(dtype=jnp.float32),
        "entropy": masked_mean(distributions.entropy(distributions.PolicyDist(logits, None)), mask),
        "total_reward": rewards.sum(-1).mean(),
    }
    batch = SequenceBatch(sequence, mask, log_prob, jnp.where(mask, values, 0.0), adv, targets)
    return jax.tree.map(lax.stop_gradient, batch), metrics


def update(
    train_state: TrainState, models: Models, batch: SequenceBatch, cfg: RlhfConfig, key: jax.Array
) -> tuple[TrainState, dict[str, jax.Array]]:
    """``update_epochs`` passes of ``num_minibatches`` shuffled minibatches of whole sequences; mean loss metrics."""
    grad_fn = jax.value_and_grad(ppo_loss, has_aux=True)

    def minibatch_step(train_state, minibatch):
        (loss, metrics), grads = grad_fn(train_state.params, models.policy, models.scalar, minibatch, cfg)
        metrics = {**metrics, "loss": loss, "grad_norm": optax.tree.norm(grads)}
        return train_state.apply_gradients(grads=grads), metrics

    def epoch(train_state, epoch_key):
        order = jax.random.permutation(epoch_key, cfg.num_prompts)
        shape = (cfg.num_minibatches, cfg.minibatch_size)
        shuffled = jax.tree.map(lambda x: x[order].reshape(shape + x.shape[1:]), batch)
        return lax.scan(minibatch_step, train_state, shuffled)

    train_state, metrics = lax.scan(epoch, train_state, jax.random.split(key, cfg.update_epochs))
    return train_state, jax.tree.map(jnp.mean, metrics)


def train(cfg: RlhfConfig, key: jax.Array, pretrained: Pretrained | None = None) -> RlhfOutput:
    """Token-level PPO from the SFT model for ``cfg.num_updates`` updates.

    Args:
      cfg: the configuration; its float leaves may be traced (and vmapped).
      key: a PRNG key (the critic's initialization, prompts, sampling, shuffling).
      pretrained: the output of ``pretrain`` (shared by every run it is given to);
        if None, ``pretrain`` runs first with a key split from ``key``.

    Returns:
      ``RlhfOutput(params, metrics)``, ``metrics[name]`` of shape ``[num_updates]``.
    """
    validate(cfg)
    if pretrained is None:
        pretrain_key, key = jax.random.split(key)
        pretrained = pretrain(cfg, pretrain_key)
    models = make_models(cfg)
    critic_key, key = jax.random.split(key)
    params = {"actor": pretrained.sft, "critic": init_params(models.scalar, critic_key)}
    train_state = TrainState.create(apply_fn=models.policy.apply, params=params, tx=make_optimizer())
    train_state = set_hyperparams(train_state, learning_rate=cfg.lr, max_grad_norm=cfg.max_grad_norm, eps=cfg.adam_eps)

    def update_step(carry, update_idx):
        train_state, key = carry
        rollout_key, update_key, key = jax.random.split(key, 3)
        if cfg.anneal_lr:
            train_state = set_hyperparams(train_state, learning_rate=cfg.lr * (1.0 - update_idx / cfg.num_updates))
        batch, metrics = rollout(cfg, models, train_state.params, pretrained, rollout_key)
        train_state, loss_metrics = update(train_state, models, batch, cfg, update_key)
        return (train_state, key), {**metrics, **loss_metrics}

    (train_state, _), metrics = lax.scan(update_step, (train_state, key), jnp.arange(cfg.num_updates, dtype=jnp.int32))
    return RlhfOutput(train_state.params, {name: metrics[name] for name in METRIC_NAMES})


def compile_and_run(fn: Callable, *args, say: Callable[[str], None] = print) -> tuple[object, float, float]:
    """``jax.jit(fn)(*args)`` on the host, compiled first: ``(output as numpy, compile seconds, run seconds)``."""
    start = time.perf_counter()
    compiled = jax.jit(fn).lower(*args).compile()
    compile_seconds = time.perf_counter() - start
    say(f"compile: {compile_seconds:.2f} s")
    start = time.perf_counter()
    output = jax.device_get(jax.block_until_ready(compiled(*args)))
    run_seconds = time.perf_counter() - start
    say(f"run:     {run_seconds:.2f} s")
    return output, compile_seconds, run_seconds
