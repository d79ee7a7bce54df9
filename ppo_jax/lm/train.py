"""``pretrain(cfg, key)`` and ``train(cfg, key, pretrained)``: RL on a sequence task as pure, jittable functions.

This module is the engine of the ``lm`` and ``rlhf`` tasks (``ppo_jax.lm.task``):
``check``, ``prepare_shared`` (= ``pretrain``), ``train`` (= ``init``, ``step``
over the updates, ``finish``; a segmented run, ``ppo_jax.segments``, calls those
itself), ``evaluate`` and ``params_tree``.

    pre = jax.jit(pretrain)(cfg, key)                                  # SFT (+ reward model), once
    out = jax.jit(train)(cfg, key, pre)                                # one run
    out = jax.jit(jax.vmap(train, in_axes=(None, 0, None)))(cfg, keys, pre)   # seeds, one program
    out = jax.jit(jax.vmap(train, in_axes=(0, 0, None)))(stacked, keys, pre)  # settings x seeds

Each update (Ziegler et al. 2019; Ouyang et al. 2022; Shao et al. 2024): sample
``num_prompts`` prompts and ``group_size`` responses to each (``temperature``,
``top_k``, ``top_p``; in ``sampler_dtype``, whose own log-probs are kept for the
mismatch metrics and ``rollout_is``: ``rollout_correction``); the actor and the reference give per-token log-probs of
that sampling distribution (``sampling.token_log_prob``), the problem's verifier (or the reward model)
a score per sequence; ``rewards`` / ``advantages`` turn the score (and a
KL penalty with ``kl_mode: reward``) into per-token advantages; then
``update_epochs`` passes of shuffled minibatches of whole sequences minimise
``token_loss.sequence_loss``. With ``kl_adaptive`` the KL coefficient follows
Ziegler et al.'s controller after every update.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
from flax.training.train_state import TrainState
from jax import lax

from ppo_jax import threefry_cpu
from ppo_jax.final_values import NON_FINITE
from ppo_jax.lm import lora, problems, sharding, tokens, verifier
from ppo_jax.lm.advantages import estimate, sequence_returns, zero_variance_groups
from ppo_jax.lm.config import LmConfig
from ppo_jax.lm.covariance_regularizers import COVARIANCE_REGULARIZERS
from ppo_jax.lm.export import export_policies  # noqa: F401 - the engine's export (Task.export)
from ppo_jax.lm.kl_estimators import KL_MODES, estimator_errors, kl_estimate
from ppo_jax.lm.metrics import eval_names, metric_names
from ppo_jax.lm.models import Models, init_params, make_models, sample, sampler_model
from ppo_jax.lm.pass_rates import TRAIN_PASS_AT_K, evaluation_correct, pass_at_k, pass_at_k_curve
from ppo_jax.lm.reward_model import REWARD_MODELS, train_reward_model
from ppo_jax.lm.rewards import place_score
from ppo_jax.lm.rollout_correction import mismatch_metrics
from ppo_jax.lm.sft import sft
from ppo_jax.lm.token_loss import SequenceBatch, minibatch_totals, sequence_loss
from ppo_jax.lm.token_math import masked_mean
from ppo_jax.lm.token_scores import score_tokens
from ppo_jax.lm.validation import validate
from ppo_jax.minibatch_epochs import minibatch_epochs
from ppo_jax.optimizer import create_train_state, set_hyperparams
from ppo_jax.scan_updates import scan_updates
from ppo_jax.schedules import scheduled

threefry_cpu.install()  # the same random bits, a faster program on the CPU


class Pretrained(NamedTuple):
    """The frozen models shared by runs, and their training curves."""

    sft: dict  # the reference, and the actor's initial parameters
    reward_model: dict  # unused with reward_model="programmatic"
    sft_loss: jax.Array  # [sft_steps] NLL per response token (NaN after SFT stopped)
    rm_loss: jax.Array  # [rm_steps] Bradley-Terry loss
    sft_accuracy: jax.Array  # [ceil(sft_steps / sft_eval_every)] sampled pass@1 at each check (NaN after the stop)
    sft_steps_taken: jax.Array  # int32


class LmOutput(NamedTuple):
    """``params = {"actor"[, "critic"]}`` after training (with LoRA the actor is the adapters, ``lora.py``);
    ``metrics[name]`` is ``[num_updates]``."""

    params: dict
    metrics: dict[str, jax.Array]


RlhfOutput = LmOutput  # the name before 0.3.0


def pretrain(cfg: LmConfig, key: jax.Array) -> Pretrained:
    """SFT of a fresh policy on demonstrations, and (reward_model="learned") the Bradley-Terry reward model."""
    validate(cfg)
    models = make_models(cfg)
    policy_key, sft_key, rm_init_key, rm_key = jax.random.split(key, 4)
    tuned = sft(cfg, models.policy, init_params(models.policy, policy_key), sft_key)
    rm_params = init_params(models.scalar, rm_init_key)
    rm_loss = jnp.zeros((0,), jnp.float32)
    if REWARD_MODELS[cfg.reward_model].trained:
        rm_params, rm_loss = train_reward_model(cfg, models.scalar, rm_params, rm_key)
    return Pretrained(tuned.params, rm_params, tuned.loss, rm_loss, tuned.accuracy, tuned.steps)


def rollout(
    cfg: LmConfig, models: Models, params: dict, pretrained: Pretrained, beta: jax.Array, key: jax.Array
) -> tuple[SequenceBatch, dict[str, jax.Array]]:
    """Sample ``group_size`` responses to each of ``num_prompts`` fresh prompts, score them, compute advantages.

    Returns the batch (rows grouped by prompt: rows ``i*G .. i*G+G-1`` share prompt i) and the rollout metrics.
    """
    params = lora.with_base(cfg, params, pretrained.sft)  # with LoRA: the actor is the SFT model + adapters
    prompt_key, sample_key = jax.random.split(key)
    prompt = jnp.repeat(problems.sample_prompts(cfg, prompt_key, cfg.num_prompts), cfg.group_size, axis=0)
    prompt = sharding.constrain_batch(prompt)  # on a mesh: the sequences over (data, fsdp)
    knobs = cfg.rollout_sampling
    sampler = sampler_model(cfg, models.policy)  # the policy in sampler_dtype: its log-probs are the mismatch's
    response, sampler_log_prob = sample(sampler, params["actor"], sample_key, prompt, problems.response_len(cfg), knobs)
    sequence, mask = tokens.join(prompt, response), tokens.response_mask(response)
    inputs, start = sequence[:, :-1], prompt.shape[-1] - 1
    scores = score_tokens(cfg, models, params, pretrained.sft, inputs, response, start)
    log_prob, ref_log_prob = scores.log_prob, scores.ref_log_prob

    verdict = problems.verify(cfg, prompt, response)
    score = REWARD_MODELS[cfg.reward_model].score(
        cfg, models.scalar, pretrained.reward_model, prompt, response, verdict
    )
    if cfg.overlong_buffer:
        length = problems.response_len(cfg)
        score = score + cfg.overlong_coef * verifier.overlong_penalty(response, length, cfg.overlong_buffer)
    kl_tokens = jnp.where(mask, kl_estimate(log_prob, ref_log_prob, cfg.kl_estimator), 0.0)
    rewards = place_score(score, mask)
    if KL_MODES[cfg.kl_mode].in_reward:
        rewards = jnp.where(mask, -beta * kl_tokens, 0.0) + rewards
    if cfg.uses_critic:
        adv, targets = estimate(cfg.advantage, rewards, mask, scores.values, cfg)
        values = jnp.where(mask, scores.values, 0.0)
    else:
        adv = estimate(cfg.advantage, rewards, mask, None, cfg)[0]
        values = targets = jnp.zeros_like(adv)
    returns = sequence_returns(rewards, mask)
    if cfg.group_size > 1:
        zero_variance = zero_variance_groups(returns, cfg.group_size)
    else:  # a group of one compares nothing
        zero_variance = jnp.zeros(returns.shape, bool)
    keep = ~zero_variance if cfg.dynamic_sampling else jnp.ones_like(zero_variance)
    regularizer = COVARIANCE_REGULARIZERS[cfg.cov_reg]
    if regularizer.draws_tokens or (regularizer.fn is not None and cfg.cov_expected_count):
        cov_keys = jax.random.split(jax.random.fold_in(key, 1), cfg.num_sequences)
    else:
        cov_keys = jnp.zeros((cfg.num_sequences,), jnp.uint32)

    lengths = mask.sum(-1).astype(jnp.float32)
    correct = verdict.correct > 0.5

    def mean_where(x, where):
        return jnp.where(where.any(), jnp.where(where, x, 0.0).sum() / jnp.maximum(where.sum(), 1), jnp.nan)

    metrics = {
        "accuracy": verdict.correct.mean(),
        "reward": score.mean(),
        "pass_at_group": verdict.correct.reshape(cfg.num_prompts, cfg.group_size).max(-1).mean(),
        **{  # the unbiased estimate from each prompt's group (Chen et al. 2021), NaN above the group size
            f"pass_at_{k}": pass_at_k(verdict.correct.reshape(cfg.num_prompts, cfg.group_size), k)
            if k <= cfg.group_size
            else jnp.float32(jnp.nan)
            for k in TRAIN_PASS_AT_K
        },
        "well_formed": verdict.well_formed.mean(dtype=jnp.float32),
        "response_length": lengths.mean(),
        "truncated": 1.0 - tokens.ended(response).mean(dtype=jnp.float32),
        "length_correct": mean_where(lengths, correct),
        "length_incorrect": mean_where(lengths, ~correct),
        "sample_entropy": masked_mean(scores.entropy, mask),
        "kl_ref": jnp.where(mask, scores.exact_kl, 0.0).sum(-1).mean(),
        "kl_ref_estimate": kl_tokens.sum(-1).mean(),
        "kl_ref_sample": jnp.where(mask, log_prob - ref_log_prob, 0.0).sum(-1).mean(),
        **estimator_errors(jnp.where(mask, log_prob, 0.0), jnp.where(mask, ref_log_prob, 0.0), scores.exact_kl, mask),
        "zero_variance_groups": zero_variance.mean(dtype=jnp.float32),
        "kept_fraction": keep.mean(dtype=jnp.float32),
        "beta": jnp.asarray(beta, jnp.float32),
        **mismatch_metrics(cfg.rollout_is, log_prob, sampler_log_prob, mask, mask & keep[:, None], cfg),
        # the names of the rlhf task (before 0.3.0)
        "score": score.mean(),
        "true_score": verdict.score.mean(),
        "eos_fraction": tokens.ended(response).mean(dtype=jnp.float32),
        "total_reward": rewards.sum(-1).mean(),
    }
    batch = SequenceBatch(
        sequence, mask & keep[:, None], log_prob, ref_log_prob, values, adv, targets, cov_keys, sampler_log_prob
    )
    return sharding.constrain_batch(jax.tree.map(lax.stop_gradient, batch)), metrics


def adapted_beta(cfg: LmConfig, beta: jax.Array, kl: jax.Array) -> jax.Array:
    """Ziegler et al. (2019), sec. 2.2: ``beta * (1 + clip(KL / target - 1, -0.2, 0.2) * n / horizon)``.

    ``kl`` is the mean over the update's sequences of ``sum_t log pi - log pi_ref``; ``n`` the number of sequences.
    """
    error = jnp.clip(kl / cfg.kl_target - 1.0, -0.2, 0.2)
    return beta * (1.0 + error * cfg.num_sequences / cfg.kl_horizon)


class Carry(NamedTuple):
    """The training state between updates."""

    train_state: TrainState
    key: jax.Array
    beta: jax.Array  # the KL coefficient in effect (adapted with kl_adaptive)


@sharding.on_mesh
def init(cfg: LmConfig, key: jax.Array, shared: Pretrained) -> Carry:
    """Actor from the SFT model (or, with LoRA, fresh adapters on it), a fresh critic (critic advantages only), the
    optimizer of those (``validate(cfg)`` first)."""
    validate(cfg)
    models = make_models(cfg)
    critic_key, key = jax.random.split(key)
    params = {"actor": lora.init_actor(cfg, models.policy, shared.sft, jax.random.fold_in(critic_key, 1))}
    if cfg.uses_critic:
        params["critic"] = init_params(models.scalar, critic_key)
    beta = jnp.asarray(cfg.beta, jnp.float32)
    return Carry(sharding.constrain_params(create_train_state(models.policy.apply, params, cfg)), key, beta)


@sharding.on_mesh
def step(cfg: LmConfig, carry: Carry, update_idx: jax.Array, shared: Pretrained) -> tuple[Carry, dict]:
    """One update: a rollout of fresh prompts, rewards and advantages, epochs of minibatch updates."""
    models = make_models(cfg)
    train_state, key, beta = carry
    rollout_key, update_key, key = jax.random.split(key, 3)
    learning_rate = scheduled(cfg.lr_schedule, cfg.lr, update_idx, cfg.num_updates)
    train_state = set_hyperparams(train_state, learning_rate=learning_rate)
    batch, metrics = rollout(cfg, models, train_state.params, shared, beta, rollout_key)
    critic = models.scalar if cfg.uses_critic else None
    train_state, loss_metrics = minibatch_epochs(
        train_state,
        batch,
        lambda params, minibatch, totals: sequence_loss(
            lora.with_base(cfg, params, shared.sft),
            models.policy,
            critic,
            sharding.constrain_batch(minibatch),
            cfg,
            beta,
            totals,
        ),
        update_key,
        num_minibatches=cfg.num_minibatches,
        update_epochs=cfg.update_epochs,
        micro_batches=cfg.micro_batches,
        totals=lambda minibatch: minibatch_totals(minibatch, cfg.micro_batches),
    )
    if cfg.kl_adaptive and KL_MODES[cfg.kl_mode].active:
        beta = adapted_beta(cfg, beta, metrics["kl_ref_sample"])
    metrics = {**metrics, **loss_metrics, "learning_rate": jnp.asarray(learning_rate, jnp.float32)}
    names = metric_names(cfg)
    absent = {"explained_variance": jnp.float32(jnp.nan)}  # no critic; other absent terms are 0 (no such loss)
    metrics = {name: metrics.get(name, absent.get(name, jnp.float32(0.0))) for name in names if name != NON_FINITE}
    return Carry(sharding.constrain_params(train_state), key, beta), metrics


def finish(cfg: LmConfig, carry: Carry, metrics: dict) -> LmOutput:
    """The run's output: the trained actor (and critic), and its metrics (``{}`` when they went to disk)."""
    return LmOutput(carry.train_state.params, metrics)


def train(
    cfg: LmConfig,
    key: jax.Array,
    pretrained: Pretrained | None = None,
    *,
    on_update: Callable | None = None,
    report_every: int = 1,
) -> LmOutput:
    """RL from the SFT model for ``cfg.num_updates`` updates.

    Args:
      cfg: the configuration; its float leaves may be traced (and vmapped).
      key: a PRNG key (the critic's initialization, prompts, sampling, shuffling).
      pretrained: the output of ``pretrain`` (shared by every run it is given to);
        if None, ``pretrain`` runs first with a key split from ``key``.
      on_update: ``on_update(update_idx, metrics)`` on the host after every update
        (``jax.debug.callback``; under ``vmap`` once per run); None: no callback.
      report_every: call ``on_update`` only after every ``report_every``-th update and the last.

    Returns:
      ``LmOutput(params, metrics)``, ``metrics[name]`` of shape ``[num_updates]``.
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


# ----------------------------------------------------------------------------- the Task engine


check = validate
"""Everything that can be wrong with an LmConfig, before anything compiles."""


prepare_shared = pretrain
"""What runs share: the SFT model (reference and initial actor) and the reward model."""


def place(cfg: LmConfig, shared: Pretrained) -> Pretrained:
    """``shared`` (host arrays) on ``cfg.mesh`` for the run's programs: the SFT / reference and reward models by
    ``sharding.param_specs``, the curves replicated; no mesh: as it is."""
    if not cfg.mesh:
        return shared
    mesh = sharding.parse_mesh(cfg.mesh)
    specs = jax.tree.map(lambda _: sharding.PartitionSpec(), shared)._replace(
        sft=sharding.param_specs(shared.sft, mesh), reward_model=sharding.param_specs(shared.reward_model, mesh)
    )
    return sharding.place(cfg.mesh, shared, specs)


def describe_shared(cfg: LmConfig, shared: Pretrained) -> dict[str, float]:
    """SFT: steps taken, final NLL per response token and sampled pass@1; the reward model's Bradley-Terry loss.

    With ``eval_samples``, also the SFT model's pass@k curve (``sft_pass_at_<k>``), drawn as the final
    evaluation draws (its knobs, ``eval_prompts`` prompts) with key 0: the same prompts for every SFT model.
    """
    out = {}
    if cfg.sft_steps:
        taken = int(shared.sft_steps_taken)
        out["sft_steps_taken"] = taken
        out["sft_nll_per_token"] = float(jnp.mean(shared.sft_loss[max(taken - 50, 0) : taken]))
        accuracy = shared.sft_accuracy[: -(-taken // cfg.sft_eval_every)]
        out["sft_sampled_pass_at_1"] = float(accuracy[-1])
    if REWARD_MODELS[cfg.reward_model].trained and cfg.rm_steps:
        out["reward_model_bt_loss"] = float(jnp.mean(shared.rm_loss[-50:]))
    if cfg.eval_samples and eval_names(cfg) and cfg.eval_prompts:
        curve = jax.jit(lambda params: _pass_at_k(cfg, params, jax.random.key(0)))(shared.sft)
        out.update({f"sft_pass_at_{k}": float(value) for k, value in curve.items()})
    return out


def _pass_at_k(cfg: LmConfig, actor: dict, key: jax.Array) -> dict[str, jax.Array]:
    """The final evaluation's pass@k curve of ``actor``: ``{"<k>": pass@k}`` (``pass_rates.PASS_AT_K`` up to its
    samples per prompt) and ``{"group": pass@group_size}``."""
    samples = cfg.eval_samples or cfg.group_size
    correct = evaluation_correct(cfg, make_models(cfg).policy, actor, key, cfg.eval_prompts, samples, cfg.eval_sampling)
    return {**{str(k): v for k, v in pass_at_k_curve(correct).items()}, "group": pass_at_k(correct, cfg.group_size)}


def evaluate(cfg: LmConfig, output: LmOutput, key: jax.Array, shared: Pretrained | None = None) -> dict:
    """pass@1, pass@group_size and pass@k (``PASS_AT_K``; NaN above the samples per prompt: ``eval_samples``, or
    group_size) of the final policy on ``eval_prompts`` fresh prompts (the task's eval_names).

    With LoRA the policy is ``shared.sft`` + the output's adapters, so ``shared`` is needed."""
    if not eval_names(cfg):
        return {}
    if not cfg.eval_prompts:  # no final evaluation: its scalars are not recorded
        return dict.fromkeys(eval_names(cfg), jnp.float32(jnp.nan))
    params = output.params
    if cfg.lora_rank:
        if shared is None:
            raise ValueError("with lora_rank > 0 the evaluation runs the adapters on the base: pass pretrain's output.")
        params = lora.with_base(cfg, params, shared.sft)
    curve = _pass_at_k(cfg, params["actor"], key)
    return {name: curve.get(name.removeprefix("eval_pass_at_"), jnp.float32(jnp.nan)) for name in eval_names(cfg)}


def params_tree(output: LmOutput, shared: Pretrained) -> dict:
    """What params.msgpack holds: the trained actor (with LoRA, its adapters; ``lora.merge`` makes the model), its
    critic if any, the reference (the SFT model, with LoRA also the base) and the reward model."""
    return {**output.params, "reference": shared.sft, "reward_model": shared.reward_model}
