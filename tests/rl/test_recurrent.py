"""Recurrent PPO (``network: gru``): the GRU state reset at every episode start inside the rollout, checked
against a NumPy loop; the update's log-probs equal the rollout's; a memory task solved by the GRU and not by
the feed-forward network; velocity-masked observations. (vmap over seeds and settings, one trace for every
traced field, segments with a checkpoint, and a resumed sweep: tests/test_task_contract.py, case ppo_gru.)"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ppo_jax.errors import ConfigError
from ppo_jax.rl import sequences
from ppo_jax.rl import train as ppo
from ppo_jax.rl.config import PPOConfig, validate
from ppo_jax.rl.envs import env_spec, make_env
from ppo_jax.rl.ppo_loss import Minibatch
from ppo_jax.rl.probe_envs import MEMORY_DELAY
from ppo_jax.rl.rollout import rollout


def small(env: str, **fields) -> PPOConfig:
    base = dict(env=env, network="gru", rnn_hidden_size=4, hidden_sizes=(5,), num_envs=3, num_steps=13)
    return PPOConfig(**{**base, "total_timesteps": 2 * 39, "num_minibatches": 1, **fields})


def perturbed_rollout(cfg: PPOConfig, seed: int = 0):
    """A rollout from init with every parameter moved off its init (biases nonzero), and the parameters."""
    runner = ppo.init(cfg, jax.random.key(seed))
    leaves, tree = jax.tree.flatten(runner.train_state.params)
    noise = jax.random.split(jax.random.key(seed + 1), len(leaves))
    params = tree.unflatten([x + 0.5 * jax.random.normal(k, x.shape) for x, k in zip(leaves, noise, strict=True)])
    runner = runner._replace(train_state=runner.train_state.replace(params=params))
    start = runner.memory
    _, traj = jax.jit(lambda r: rollout(r, cfg, env_spec(cfg)))(runner)
    return jax.device_get(params["params"]), start, jax.device_get(traj)


def np_network(p: dict, hidden: dict, obs: np.ndarray, reset: bool):
    """The network by hand for one env and one step: MLP (tanh), the GRU (Cho et al. 2014, flax's gate layout),
    the heads; ``hidden`` {"actor": [H], "critic": [H]} is zeroed first where ``reset``. Returns (new hidden,
    logits, value)."""

    def dense(q, x):
        return x @ np.asarray(q["kernel"], np.float64) + np.asarray(q.get("bias", 0.0), np.float64)

    def sigmoid(x):
        return 1.0 / (1.0 + np.exp(-x))

    def gru(q, h, x):
        c = q["GRUCell_0"]
        r = sigmoid(dense(c["ir"], x) + dense(c["hr"], h))
        z = sigmoid(dense(c["iz"], x) + dense(c["hz"], h))
        n = np.tanh(dense(c["in"], x) + r * dense(c["hn"], h))
        return (1.0 - z) * n + z * h

    new = {}
    for part in ("actor", "critic"):
        h = np.zeros_like(hidden[part]) if reset else hidden[part]
        new[part] = gru(p[f"{part}_gru"], h, np.tanh(dense(p[f"{part}_torso"]["Dense_0"], obs)))
    return new, dense(p["policy_head"], new["actor"]), dense(p["value_head"], new["critic"])[0]


@pytest.mark.parametrize("env", ["Probe-Memory", "Probe-TimeLimit"])  # terminations; truncations (every 5 steps)
def test_the_rollout_resets_the_state_at_every_episode_start_as_a_numpy_loop_does(env):
    cfg = small(env)
    params, _, traj = perturbed_rollout(cfg)
    done = np.asarray(traj.done)
    assert done[:-1].any(), "the rollout must hold episode ends in its middle"
    reset = np.concatenate([np.ones((1, cfg.num_envs), bool), done[:-1]])  # step t starts an episode after t-1 ended
    np.testing.assert_array_equal(traj.reset, reset)
    for b in range(cfg.num_envs):
        hidden = {part: np.zeros(cfg.rnn_hidden_size) for part in ("actor", "critic")}
        for t in range(cfg.num_steps):
            obs = np.asarray(traj.obs[t, b], np.float64)
            hidden, logits, value = np_network(params, hidden, obs, reset[t, b])
            log_probs = logits - np.log(np.exp(logits - logits.max()).sum()) - logits.max()
            assert traj.log_prob[t, b] == pytest.approx(log_probs[int(traj.action[t, b])], abs=1e-5)
            assert traj.value[t, b] == pytest.approx(value, abs=1e-5)
            # V(next obs) with the state that saw step t, never reset: a truncated episode's final observation
            # is valued with its own episode's memory
            _, _, next_value = np_network(params, hidden, np.asarray(traj.next_obs[t, b], np.float64), False)
            assert traj.next_value[t, b] == pytest.approx(next_value, abs=1e-5)
    if env == "Probe-TimeLimit":
        assert not np.asarray(traj.terminated).any() and done.any()  # the episode ends were truncations


@pytest.mark.parametrize("network", ["gru", "lstm"])
def test_each_episode_is_valued_from_the_initial_state_on_its_own_observations(network):
    # whatever the rollout carries, step t of an episode must see that episode's observations only, from zeros
    cfg = small("Probe-Memory", network=network, num_steps=14)
    params, _, traj = perturbed_rollout(cfg, seed=5)
    network_def = ppo.make_network(cfg)
    starts = np.asarray(traj.reset)
    for b in range(cfg.num_envs):
        first = np.flatnonzero(starts[:, b])
        for begin, end in zip(first, [*first[1:], cfg.num_steps], strict=True):
            obs = jnp.asarray(traj.obs[begin:end, b])[:, None]  # [t, 1, obs_dim]: this episode alone
            _, (dist, value) = network_def.apply(
                {"params": params}, network_def.initial_memory(1), obs, jnp.zeros((end - begin, 1), bool)
            )
            logits = dist.loc[:, 0] - jax.scipy.special.logsumexp(dist.loc[:, 0], axis=-1, keepdims=True)
            chosen = jnp.take_along_axis(logits, jnp.asarray(traj.action[begin:end, b])[:, None], axis=-1)[:, 0]
            np.testing.assert_allclose(chosen, traj.log_prob[begin:end, b], atol=1e-5)
            np.testing.assert_allclose(value[:, 0], traj.value[begin:end, b], atol=1e-5)


@pytest.mark.parametrize("network", ["gru", "lstm"])
def test_the_update_computes_the_rollouts_log_probs_again_on_whole_env_sequences(network):
    cfg = small("Probe-Memory", network=network, num_envs=4, num_steps=11)
    params, start, traj = perturbed_rollout(cfg, seed=3)
    apply_fn = ppo.make_network(cfg).apply
    steps = Minibatch(traj.obs, traj.action, traj.log_prob, traj.value, traj.value, traj.value, traj.dist)
    seqs = sequences.from_rollout(steps, start.hidden, traj.reset)
    assert seqs.steps.obs.shape[:2] == (cfg.num_envs, cfg.num_steps)  # envs first: minibatches split envs

    def log_probs(seqs):
        dist, _, flat = sequences.forward({"params": params}, apply_fn, seqs)
        logits = dist.loc - jax.scipy.special.logsumexp(dist.loc, axis=-1, keepdims=True)
        return np.asarray(jnp.take_along_axis(logits, flat.action[:, None], axis=-1)[:, 0])

    np.testing.assert_allclose(log_probs(seqs), np.asarray(traj.log_prob).reshape(-1), atol=1e-5)
    envs = np.array([2, 0])  # a minibatch of two envs, in shuffled order
    subset = jax.tree.map(lambda x: x[envs], seqs)
    np.testing.assert_allclose(log_probs(subset), np.asarray(traj.log_prob)[:, envs].reshape(-1), atol=1e-5)


def test_the_memory_probe_is_solved_by_the_gru_and_not_by_the_feed_forward_network():
    # Probe-Memory: optimal return 1 (remember the cue), best without memory 0 (a guess at the answer step)
    fields = dict(env="Probe-Memory", total_timesteps=16 * 32 * 30, num_envs=16, num_steps=32, num_minibatches=4)
    fields.update(lr=1e-3, hidden_sizes=(32,), rnn_hidden_size=32)
    final = {}
    for network in ("mlp", "gru"):
        out = jax.jit(ppo.train)(PPOConfig(network=network, **fields), jax.random.key(0))
        final[network] = float(np.mean(np.asarray(out.metrics["episode_return"])[-5:]))
    assert final["gru"] >= 0.9, final
    assert final["mlp"] <= 0.5, final


def test_the_memory_probe_rewards_the_answer_after_the_delay_by_hand():
    spec = make_env("Probe-Memory")
    cues = set()
    for cue_key in range(4):
        obs, state = spec.env.reset(jax.random.key(cue_key), spec.params)
        cue = float(obs[0])
        cues.add(cue)
        for answer in (0, 1):
            s, rewards = state, []
            for t in range(MEMORY_DELAY + 1):
                o, s, r, terminated, _ = spec.env.step_env(jax.random.key(t), s, answer, spec.params)
                rewards.append(float(r))
                assert float(o[0]) == 0.0  # the cue is gone after the first step
                assert bool(terminated) == (t == MEMORY_DELAY)
            expected = 1.0 if (answer == 1) == (cue > 0) else -1.0
            assert rewards == [0.0] * MEMORY_DELAY + [expected]
    assert cues == {-1.0, 1.0}


@pytest.mark.parametrize(("env", "keep"), [("CartPole-v1", [0, 2]), ("Pendulum-v1", [0, 1])])
def test_masked_velocity_observations_are_the_full_ones_without_velocities(env, keep):
    full, masked = make_env(env), make_env(env, None, True)
    assert masked.obs_dim == len(keep) and masked.action_dim == full.action_dim
    key = jax.random.key(0)
    obs, state = full.env.reset(key, full.params)
    masked_obs, masked_state = masked.env.reset(key, masked.params)
    np.testing.assert_array_equal(masked_obs, np.asarray(obs)[keep])
    action = 0 if full.discrete else jnp.array([1.0])
    for t in range(30):  # CartPole falls within 30 steps of one action: a final observation is masked too
        step_key = jax.random.key(t)
        obs, state, reward, _, _, info = full.env.step(step_key, state, action, full.params)
        masked_obs, masked_state, masked_reward, _, _, masked_info = masked.env.step(
            step_key, masked_state, action, masked.params
        )
        np.testing.assert_array_equal(masked_obs, np.asarray(obs)[keep])
        np.testing.assert_array_equal(masked_info["final_observation"], np.asarray(info["final_observation"])[keep])
        assert masked_reward == reward


def test_recurrent_settings_that_cannot_work_are_refused_before_anything_compiles():
    with pytest.raises(ConfigError, match="num_minibatches=4 must divide num_envs=6"):
        validate(PPOConfig(network="gru", num_envs=6, num_minibatches=4, num_steps=128))
    with pytest.raises(ConfigError, match="Breakout-MinAtar has no velocity mask"):
        validate(PPOConfig(env="Breakout-MinAtar", mask_velocity=True))
    assert (
        "rnn_hidden_size" in PPOConfig().inert_fields()
        and "rnn_hidden_size" not in PPOConfig(network="gru").inert_fields()
    )
