"""Probe environments with analytic answers, for debugging and learning tests.

After Andy Jones, "Debugging RL, Without the Agonizing Pain" (2021): each env
isolates one part of the agent, so a failure points at that part.

| id                        | obs          | actions | reward                     | answer                          |
|---------------------------|--------------|---------|----------------------------|---------------------------------|
| Probe-ConstantReward      | [0]          | 1       | +1, episode ends           | V = 1                           |
| Probe-ObsDependentReward  | [+-1]        | 1       | = obs, episode ends        | V(obs) = obs                    |
| Probe-ActionReward        | [0]          | 2       | +1 if action 1 else -1     | pi(1) -> 1, V -> 1              |
| Probe-DiscountedTwoStep   | [0] then [1] | 1       | +1 at the end of step two  | V(0) = gamma, V(1) = 1          |
| Probe-ContinuousAction    | [0]          | Box(1)  | -(a - 0.5)^2, episode ends | mean action -> 0.5              |
| Probe-TimeLimit           | [0]          | 1       | +1 every step, truncated   | V = 1 / (1 - gamma)             |
|                           |              |         | after 5 steps, never ends  |                                 |
| Probe-Diverge             | [0]          | 1       | +1 every step, NaN from    | the run diverges at update      |
|                           |              |         | step 101 on, truncated     | 100 // num_steps (NaN loss)     |
|                           |              |         | after 200, never ends      |                                 |
| Probe-Memory              | [+-1] then   | 2       | at step 5: +1 if the action| with memory 1; without, 0       |
|                           | [0] x 4      |         | matches the first obs's    | (the cue is gone: a guess)      |
|                           |              |         | sign, else -1; episode ends|                                 |

Probe-TimeLimit tells a correct time-limit treatment from the common bug: an
agent that bootstraps truncated episodes from V(final observation) learns
V = 1/(1-gamma); one that treats the time limit as termination learns the mean
of the 5-step truncated returns, which is smaller.

Probe-Memory needs memory: the cue (+-1) is shown at the first step only, and only the answer at the last
step (``MEMORY_DELAY`` steps later) is rewarded. A policy that remembers the cue scores 1 per episode; a
feed-forward one sees the same zero observation at the answer step whatever the cue, so its best is 0 (its
expected return is 2 P(correct) - 1 with P(correct) = 1/2). The observation carries no clock either.

Probe-Diverge checks how a diverged run is handled (``non_finite``,
``ppo_jax.scan_updates``): its reward is NaN from each episode's step
``DIVERGE_STEP`` (0-based) on, so the loss is NaN first at the update whose
rollout holds that step of the first episode, ``DIVERGE_STEP // num_steps``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct
from gymnax.environments import environment, spaces


@struct.dataclass
class ProbeState(environment.EnvState):
    obs: jax.Array
    time: int


@struct.dataclass
class ProbeParams(environment.EnvParams):
    max_steps_in_episode: int = 1000


class _Probe(environment.Environment[ProbeState, ProbeParams]):
    """One-step probe: subclasses set the observation and the reward."""

    n_actions = 1

    @property
    def default_params(self) -> ProbeParams:
        return ProbeParams()

    def initial_obs(self, key):
        return jnp.zeros((1,), jnp.float32)

    def reward(self, state, action):
        raise NotImplementedError

    def reset_env(self, key, params):
        obs = self.initial_obs(key)
        return obs, ProbeState(obs=obs, time=0)

    def step_env(self, key, state, action, params):
        reward = self.reward(state, action)
        new_state = ProbeState(obs=state.obs, time=state.time + 1)
        return state.obs, new_state, jnp.asarray(reward, jnp.float32), jnp.array(True), {}

    def is_terminated(self, state, params):
        return jnp.array(True)

    @property
    def num_actions(self) -> int:
        return self.n_actions

    def action_space(self, params=None):
        return spaces.Discrete(self.n_actions)

    def observation_space(self, params):
        return spaces.Box(-1.0, 1.0, (1,), jnp.float32)


class ConstantReward(_Probe):
    def reward(self, state, action):
        return 1.0


class ObsDependentReward(_Probe):
    def initial_obs(self, key):
        return jnp.where(jax.random.bernoulli(key), 1.0, -1.0).reshape(1).astype(jnp.float32)

    def reward(self, state, action):
        return state.obs[0]


class ActionReward(_Probe):
    n_actions = 2

    def reward(self, state, action):
        return jnp.where(action == 1, 1.0, -1.0)


class ContinuousAction(_Probe):
    def reward(self, state, action):
        return -jnp.sum((action - 0.5) ** 2)

    def action_space(self, params=None):
        return spaces.Box(-2.0, 2.0, (1,), jnp.float32)


class DiscountedTwoStep(_Probe):
    """obs [0] at the first step, [1] at the second; +1 when the second step ends the episode."""

    def step_env(self, key, state, action, params):
        last = state.time >= 1
        reward = jnp.where(last, 1.0, 0.0).astype(jnp.float32)
        new_state = ProbeState(obs=jnp.ones((1,), jnp.float32), time=state.time + 1)
        return new_state.obs, new_state, reward, last, {}

    def is_terminated(self, state, params):
        return state.time >= 2


class TimeLimit(_Probe):
    @property
    def default_params(self) -> ProbeParams:
        return ProbeParams(max_steps_in_episode=5)

    def step_env(self, key, state, action, params):
        new_state = ProbeState(obs=state.obs, time=state.time + 1)
        return state.obs, new_state, jnp.asarray(1.0, jnp.float32), jnp.array(False), {}

    def is_terminated(self, state, params):
        return jnp.array(False)


DIVERGE_STEP = 100
"""Probe-Diverge's reward is NaN from each episode's step ``DIVERGE_STEP`` (0-based) on."""


class Diverge(TimeLimit):
    """+1 every step, NaN from step ``DIVERGE_STEP`` on; never terminated, truncated after ``2 * DIVERGE_STEP`` steps."""

    @property
    def default_params(self) -> ProbeParams:
        return ProbeParams(max_steps_in_episode=2 * DIVERGE_STEP)

    def step_env(self, key, state, action, params):
        reward = jnp.where(state.time >= DIVERGE_STEP, jnp.nan, 1.0).astype(jnp.float32)
        new_state = ProbeState(obs=state.obs, time=state.time + 1)
        return state.obs, new_state, reward, jnp.array(False), {}


MEMORY_DELAY = 4
"""Steps between Probe-Memory's cue (step 0) and the rewarded answer (step ``MEMORY_DELAY``)."""


class Memory(_Probe):
    """Cue +-1 at step 0 (kept in the state), zero observations after; the action at step ``MEMORY_DELAY`` is
    rewarded +1 if it names the cue (action 1 for +1, 0 for -1), else -1, and ends the episode."""

    n_actions = 2

    def initial_obs(self, key):
        return jnp.where(jax.random.bernoulli(key), 1.0, -1.0).reshape(1).astype(jnp.float32)

    def step_env(self, key, state, action, params):
        last = state.time >= MEMORY_DELAY
        correct = (action == 1) == (state.obs[0] > 0)
        reward = jnp.where(last, jnp.where(correct, 1.0, -1.0), 0.0).astype(jnp.float32)
        new_state = ProbeState(obs=state.obs, time=state.time + 1)
        return jnp.zeros((1,), jnp.float32), new_state, reward, last, {}

    def is_terminated(self, state, params):
        return state.time > MEMORY_DELAY


PROBE_ENVS = {
    "Probe-ConstantReward": ConstantReward,
    "Probe-ObsDependentReward": ObsDependentReward,
    "Probe-ActionReward": ActionReward,
    "Probe-DiscountedTwoStep": DiscountedTwoStep,
    "Probe-ContinuousAction": ContinuousAction,
    "Probe-TimeLimit": TimeLimit,
    "Probe-Diverge": Diverge,
    "Probe-Memory": Memory,
}
