"""An environment suite added from outside the package (no file of ``ppo_jax/`` edited): registered in
``ppo_jax.rl.envs.SUITES``, it trains, sweeps and reports like the built-in ones, then is unregistered.

The toy suite has one env, ``toy/Chain-v0``: a chain of ``LENGTH`` states, the agent at the left end, actions
left/right, reward +1 and termination on reaching the right end, truncated after ``TIME_LIMIT`` steps. The
shortest episode is ``LENGTH - 1`` steps; a uniformly random walk (reflected at the left end) needs
(LENGTH - 1)^2 = 16 steps on average.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import struct
from gymnax.environments import environment, spaces

from ppo_jax import PPOConfig
from ppo_jax.final_values import final_value
from ppo_jax.rl.envs import SUITES, Suite, check_env, discrete_action_space, gymnax_style_spec, inert_env_fields

LENGTH = 5
TIME_LIMIT = 32
ENV = "toy/Chain-v0"
BASE = dict(env=ENV, total_timesteps=8192, num_envs=8, num_steps=32, num_minibatches=4, lr=3e-3, ent_coef=0.0)


@struct.dataclass
class ChainState(environment.EnvState):
    position: jax.Array
    time: int


@struct.dataclass
class ChainParams(environment.EnvParams):
    max_steps_in_episode: int = TIME_LIMIT


class Chain(environment.Environment[ChainState, ChainParams]):
    """Walk right along a chain of ``LENGTH`` states; obs: the position, one-hot ``[LENGTH]``."""

    @property
    def default_params(self) -> ChainParams:
        return ChainParams()

    def step_env(self, key, state, action, params):
        position = jnp.clip(state.position + 2 * action - 1, 0, LENGTH - 1)
        state = ChainState(position=position, time=state.time + 1)
        reward = (position == LENGTH - 1).astype(jnp.float32)
        return self.get_obs(state), state, reward, self.is_terminated(state, params), {}

    def reset_env(self, key, params):
        state = ChainState(position=jnp.int32(0), time=0)
        return self.get_obs(state), state

    def get_obs(self, state, params=None, key=None):
        return jax.nn.one_hot(state.position, LENGTH)

    def is_terminated(self, state, params):  # the time limit is gymnax's truncation (``is_truncated``)
        return state.position == LENGTH - 1

    def action_space(self, params=None):
        return spaces.Discrete(2)

    def observation_space(self, params):
        return spaces.Box(0.0, 1.0, (LENGTH,), jnp.float32)


TOY = Suite(
    names=lambda: [ENV],
    make=lambda name, backend, mask_velocity: gymnax_style_spec(name, Chain(), ChainParams(), mask_velocity),
    discrete=lambda name: discrete_action_space(Chain(), None),
    prefix="toy/",
    doc="a chain walk, registered by a test",
)


@pytest.fixture(scope="module")
def toy_suite():
    SUITES.register("toy", TOY)
    try:
        yield TOY
    finally:
        SUITES.unregister("toy")


def test_the_table_answers_for_the_toy_suite(toy_suite, capsys):
    from ppo_jax.cli import main
    from ppo_jax.errors import ConfigError
    from ppo_jax.rl.presets import default_preset

    assert check_env(ENV) is toy_suite and default_preset(ENV) == "none"
    assert "brax_backend" in inert_env_fields(ENV) and "brax_backend" in PPOConfig(env=ENV).inert_fields()
    with pytest.raises(ConfigError, match="toy/Chain-v0"):  # a close match, among every suite's ids
        check_env("toy/Chian-v0")
    assert main(["envs"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert listed[listed.index("# toy: a chain walk, registered by a test") + 1] == ENV


def test_a_suite_not_installed_gives_its_install_hint_before_anything_compiles(capsys):
    from jax import monitoring

    from ppo_jax.cli import main

    missing = Suite(
        names=lambda: ["absent/Task-v0"],
        make=None,
        discrete=None,
        prefix="absent/",
        available=lambda: False,
        install_hint="pip install absent-suite",
    )
    compiles = []
    monitoring.register_event_duration_secs_listener(
        lambda name, secs, **kw: compiles.append(name) if "backend_compile" in name else None
    )
    SUITES.register("absent", missing)
    try:
        assert main(["train", "--env", "absent/Task-v0", "--total-timesteps", "1024"]) == 2
        assert main(["train", "--env", "absent/Other-v0"]) == 2  # its prefix: the hint, not "unknown"
    finally:
        SUITES.unregister("absent")
    err = capsys.readouterr().err
    assert err.count("absent/Task-v0: pip install absent-suite") == 1 and "absent/Other-v0: pip install" in err
    assert compiles == []


def test_the_toy_suite_trains(toy_suite):
    from ppo_jax.rl.train import train

    keys = jax.random.split(jax.random.key(0), 2)
    out = jax.jit(jax.vmap(train, in_axes=(None, 0)))(PPOConfig(**BASE), keys)
    lengths = final_value(np.asarray(out.metrics["episode_length"]), 0.1)
    assert (lengths < 6).all(), lengths  # 4 is the shortest walk, 16 a random one's mean


def test_the_toy_suite_sweeps_and_reports(toy_suite, tmp_path):
    from ppo_jax import sweep
    from ppo_jax.report import make_report

    spec = {"name": "toy", "envs": [ENV], "seeds": 2, "base": BASE, "grid": {"clip_eps": [0.1, 0.3]}}
    table = sweep.run(spec, tmp_path / "sweep", chunk_size=4, progress=False, cache_dir=None)
    assert set(table.env) == {ENV} and table.setting_id.nunique() == 2 and table.seed.nunique() == 2
    scores = tmp_path / "scores.yaml"  # an env of a new suite brings its reference scores (report/scores.py)
    scores.write_text(f"{ENV}: {{random: 0.0, best: 1.0, source: a toy scale, not measured}}\n")
    report = make_report([tmp_path / "sweep"], tmp_path / "report", reps=100, reference_scores=scores)
    assert ENV in (report / "final_return.md").read_text()
