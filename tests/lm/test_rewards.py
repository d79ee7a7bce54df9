"""Rewards, masks and the loss of token-level PPO, against NumPy loops and cases worked by hand."""

from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ppo_jax.errors import ConfigError
from ppo_jax.lm import copy_task, tokens
from ppo_jax.lm.advantages import estimate
from ppo_jax.lm.config import RlhfConfig
from ppo_jax.lm.copy_task import score as programmatic_score
from ppo_jax.lm.reward_model import bradley_terry_loss, pairwise_accuracy
from ppo_jax.lm.rewards import kl_rewards, place_score, token_rewards
from ppo_jax.lm.token_loss import SequenceBatch, loss_from_outputs
from ppo_jax.lm.validation import validate


def advantages(rewards, values, mask, *, gamma, gae_lambda, mode="gae"):
    """A critic estimator's ``(advantages, targets)`` through the table, one lambda for the actor and the critic."""
    cfg = SimpleNamespace(gamma=gamma, gae_lambda=gae_lambda, critic_lambda=gae_lambda)
    return estimate(mode, rewards, mask, values, cfg)


# Under jit: one compilation per function instead of one per eager op (seconds on a loaded 2-core CPU).
advantages = jax.jit(advantages, static_argnames="mode")
demonstrate = jax.jit(copy_task.demonstrate, static_argnums=(2, 3))

E, P = tokens.EOS, tokens.PAD
# Four responses of different lengths (L = 5): EOS at 2, EOS at 0, no EOS (cut at L), EOS at 1.
RESPONSES = np.array(
    [
        [3, 4, E, P, P],
        [E, P, P, P, P],
        [3, 4, 5, 6, 7],
        [9, E, P, P, P],
    ],
    np.int32,
)
LAST = [2, 0, 4, 1]  # worked by hand: the position of each response's last token


def test_response_mask_and_length():
    mask = np.asarray(tokens.response_mask(RESPONSES))
    expected = np.array([[t <= last for t in range(5)] for last in LAST])
    np.testing.assert_array_equal(mask, expected)
    np.testing.assert_array_equal(tokens.response_length(RESPONSES), [3, 1, 5, 2])
    # Tokens after the first EOS become PAD.
    np.testing.assert_array_equal(tokens.end_at_eos(np.array([[3, E, 4, E, 5]])), [[3, E, P, P, P]])


def test_score_lands_on_the_last_token():
    mask = tokens.response_mask(RESPONSES)
    placed = np.asarray(place_score(jnp.array([1.0, 2.0, 3.0, 4.0]), mask))
    expected = np.zeros((4, 5), np.float32)
    for b, last in enumerate(LAST):
        expected[b, last] = b + 1.0
    np.testing.assert_array_equal(placed, expected)


def test_token_rewards_match_a_numpy_loop():
    rng = np.random.default_rng(0)
    log_prob = rng.normal(size=(4, 5)).astype(np.float32)
    ref_log_prob = rng.normal(size=(4, 5)).astype(np.float32)
    score = rng.normal(size=4).astype(np.float32)
    beta = 0.3
    expected = np.zeros((4, 5), np.float32)
    for b in range(4):
        for t in range(5):
            if t <= LAST[b]:
                expected[b, t] = -beta * (log_prob[b, t] - ref_log_prob[b, t])
            if t == LAST[b]:
                expected[b, t] += score[b]
    mask = tokens.response_mask(RESPONSES)
    got = token_rewards(score, log_prob, ref_log_prob, mask, beta=jnp.float32(beta))
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-7)
    # Padding earns nothing, whatever its log-probs.
    assert np.all(np.asarray(kl_rewards(log_prob, ref_log_prob + 100.0, mask, beta=beta))[~np.asarray(mask)] == 0)


def _gae_loop(rewards, values, last, gamma, lam):
    """GAE of one sequence, written out: no bootstrap past its last token."""
    adv = np.zeros_like(rewards)
    running = 0.0
    for t in reversed(range(last + 1)):
        next_value = values[t + 1] if t < last else 0.0
        delta = rewards[t] + gamma * next_value - values[t]
        running = delta + gamma * lam * (running if t < last else 0.0)
        adv[t] = running
    return adv


def test_gae_over_responses_matches_a_numpy_loop():
    rng = np.random.default_rng(1)
    rewards = rng.normal(size=(4, 5)).astype(np.float32)
    values = rng.normal(size=(4, 5)).astype(np.float32)
    mask = tokens.response_mask(RESPONSES)
    rewards = np.where(mask, rewards, 0.0).astype(np.float32)
    adv, target = advantages(rewards, values, mask, gamma=jnp.float32(0.9), gae_lambda=jnp.float32(0.8))
    for b in range(4):
        expected = _gae_loop(rewards[b], values[b], LAST[b], 0.9, 0.8)
        np.testing.assert_allclose(adv[b], expected, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(
            target[b], np.where(np.asarray(mask[b]), expected + values[b], 0.0), rtol=1e-5, atol=1e-6
        )


def test_score_alone_reaches_every_token_with_gamma_lambda_one():
    # gamma = lambda = 1, V = 0, only a score of 2 at the end: every response token's advantage is 2.
    mask = tokens.response_mask(RESPONSES)
    rewards = place_score(jnp.full((4,), 2.0), mask)
    adv, _ = advantages(rewards, jnp.zeros((4, 5)), mask, gamma=1.0, gae_lambda=1.0)
    np.testing.assert_array_equal(adv, np.where(np.asarray(mask), 2.0, 0.0))


def test_broadcast_advantage_worked_by_hand():
    # Response 0 (3 tokens): rewards 0.1, -0.2, 1.0 (score), V(s_0) = 0.5, gamma = 1:
    # sequence return 0.9, advantage 0.9 - 0.5 = 0.4 on each of its 3 tokens, 0 on padding.
    mask = tokens.response_mask(RESPONSES[:1])
    rewards = jnp.array([[0.1, -0.2, 1.0, 0.0, 0.0]])
    values = jnp.array([[0.5, 7.0, 7.0, 7.0, 7.0]])
    adv, _ = advantages(rewards, values, mask, gamma=1.0, gae_lambda=0.95, mode="broadcast")
    np.testing.assert_allclose(adv, [[0.4, 0.4, 0.4, 0.0, 0.0]], atol=1e-6)


def test_masked_tokens_get_exactly_zero_gradient():
    prompt_len, num, length, vocab = 3, 4, 5, 10
    rng = np.random.default_rng(2)
    prompt = rng.integers(2, vocab, size=(num, prompt_len)).astype(np.int32)
    sequence = tokens.join(prompt, RESPONSES)
    mask = tokens.response_mask(RESPONSES)
    batch = SequenceBatch(
        sequence=sequence,
        mask=mask,
        log_prob=jnp.asarray(rng.normal(size=(num, length)) - 2.0, jnp.float32),
        value=jnp.asarray(rng.normal(size=(num, length)), jnp.float32),
        advantage=jnp.asarray(rng.normal(size=(num, length)), jnp.float32),
        target=jnp.asarray(rng.normal(size=(num, length)), jnp.float32),
        ref_log_prob=jnp.asarray(rng.normal(size=(num, length)) - 2.0, jnp.float32),
        cov_key=jnp.zeros((num,), jnp.uint32),
    )
    cfg = RlhfConfig(
        ent_coef=0.01, clip_vloss=False, kl_mode="loss", kl_estimator="k3"
    )  # a clipped value loss has zero gradient by design
    logits = jnp.asarray(rng.normal(size=(num, prompt_len + length - 1, vocab)), jnp.float32)
    values = jnp.asarray(rng.normal(size=(num, prompt_len + length - 1)), jnp.float32)

    def loss(logits, values):
        return loss_from_outputs(logits, values, batch, cfg, 0.1, prompt_len=prompt_len)[0]

    grad_logits, grad_values = jax.jit(jax.grad(loss, argnums=(0, 1)))(logits, values)
    # Row r of the outputs predicts sequence token r + 1: rows < prompt_len - 1 predict prompt tokens,
    # row prompt_len - 1 + t predicts response token t.
    used = np.zeros((num, prompt_len + length - 1), bool)
    for b, last in enumerate(LAST):
        used[b, prompt_len - 1 : prompt_len + last] = True
    grad_logits, grad_values = np.asarray(grad_logits), np.asarray(grad_values)
    assert np.all(grad_logits[~used] == 0.0) and np.all(grad_values[~used] == 0.0)
    assert np.all(np.abs(grad_logits[used]).sum(-1) > 0) and np.all(grad_values[used] != 0.0)


def test_programmatic_score_worked_by_hand():
    prompt = np.array([[3, 4, 5]] * 4, np.int32)  # intended response: 3 4 5 EOS
    response = np.array(
        [
            [3, 4, 5, E, P],  # all 4 positions right
            [3, 4, E, P, P],  # 3 and 4 right, EOS too early: 2/4
            [3, 4, 5, 6, E],  # no EOS at position 3: 3/4
            [E, P, P, P, P],  # nothing right
        ],
        np.int32,
    )
    np.testing.assert_allclose(programmatic_score(prompt, response), [1.0, 0.5, 0.75, 0.0])


def test_demonstrations_without_noise_are_the_intended_response():
    prompt = copy_task.sample_prompts(jax.random.key(0), 8, 4, 10)
    demos = demonstrate(jax.random.key(1), prompt, 6, 10, 0.0)
    np.testing.assert_array_equal(demos, copy_task.target_response(prompt, 6))
    noisy = demonstrate(jax.random.key(1), prompt, 6, 10, 1.0)
    assert np.asarray(noisy).max() < 10 and np.asarray(noisy).min() >= 0


def test_bradley_terry_loss_and_accuracy_by_hand():
    # margin of the chosen one: +1 and -1 -> loss = (log(1 + e^-1) + log(1 + e^1)) / 2
    loss = bradley_terry_loss(jnp.array([1.0, 0.0]), jnp.array([0.0, 1.0]), jnp.array([1.0, 1.0]))
    np.testing.assert_allclose(loss, (np.log1p(np.exp(-1.0)) + np.log1p(np.exp(1.0))) / 2, rtol=1e-6)
    acc = pairwise_accuracy(
        jnp.array([1.0, 0.0, 2.0, 5.0]),
        jnp.array([0.0, 1.0, 2.0, 0.0]),
        jnp.array([1.0, 1.0, 1.0, 0.5]),
        jnp.array([0.0, 0.0, 0.0, 0.5]),
    )
    np.testing.assert_allclose(acc, (1.0 + 0.0 + 0.5) / 3)  # the tied true pair is not counted


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(max_response_len=4), "max_response_len=4"),
        (dict(num_minibatches=5), "num_minibatches=5"),
        (dict(beta=-0.1), "beta must be >= 0"),
        (dict(reward_model="human"), "unknown reward_model"),
        (dict(gamma=1.5), "gamma must be <= 1"),
    ],
)
def test_validation_messages(change, message):
    with pytest.raises(ConfigError, match=message):
        validate(RlhfConfig(**change))


def test_unknown_field_names_a_close_match():
    with pytest.raises(ConfigError, match="Did you mean: beta"):
        RlhfConfig.from_dict({"betta": 0.1})


def test_legacy_anneal_lr_becomes_lr_schedule():
    assert RlhfConfig().lr_schedule == "constant"
    assert RlhfConfig.from_dict({"anneal_lr": True}).lr_schedule == "linear"
    assert RlhfConfig.from_dict({"anneal_lr": False}).lr_schedule == "constant"
    with pytest.raises(ConfigError, match="unknown lr_schedule 'cosine'"):
        validate(RlhfConfig(lr_schedule="cosine"))


def test_inert_fields_of_rlhf():
    # What the RLHF configuration never reads: the arithmetic problems, the transformer, the critic-free and
    # entropy-control switches, the final evaluation (the rlhf task has none).
    unused = {
        "digits",
        "chain_len",
        "countdown_numbers",
        "countdown_attempts",
        "scratchpad",
        "scratchpad_filler",
        "model_dim",
        "num_layers",
        "num_heads",
        "adv_eps",
        "dual_clip_c",
        "kl_target",
        "kl_horizon",
        "clip_cov_fraction",
        "clip_cov_low",
        "clip_cov_high",
        "kl_cov_fraction",
        "kl_cov_coef",
        "cov_expected_count",
        "overlong_coef",
        "format_reward",
        "eval_prompts",
        "eval_samples",
        "eval_temperature",
        "eval_top_k",
        "eval_top_p",
        "chat_template",
        "rollout_is_threshold",
        "rollout_is_threshold_low",
        "lora_alpha",
        "lora_targets",
    }
    assert set(RlhfConfig().inert_fields()) == unused  # learned reward model, SFT, value clipping: all used
    programmatic = set(RlhfConfig(reward_model="programmatic").inert_fields()) - unused
    assert programmatic == {"rm_steps", "rm_lr", "bt_temperature"}
    assert set(RlhfConfig(reward_model="programmatic", sft_steps=0).inert_fields()) - unused == {
        "rm_steps",
        "rm_lr",
        "bt_temperature",
        "sft_lr",
        "demo_noise",
        "pretrain_batch",
        "sft_target_accuracy",
        "sft_eval_every",
    }
    assert set(RlhfConfig(clip_vloss=False).inert_fields()) - unused == {"vf_clip_eps"}
