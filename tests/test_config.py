"""PPOConfig construction and the validation that runs before anything compiles."""

import jax
import numpy as np
import pytest

from ppo_jax import ConfigError, PPOConfig, train, validate
from ppo_jax.config import TRACED_FIELDS


def test_numbers_become_float32_leaves_and_static_fields_stay_python():
    cfg = PPOConfig(lr=1e-3, clip_eps=1, gamma=0.9)
    for name in TRACED_FIELDS:
        value = getattr(cfg, name)
        assert np.asarray(value).dtype == np.float32, name
    assert float(cfg.clip_eps) == 1.0
    leaves, _ = jax.tree.flatten(cfg)
    assert len(leaves) == len(TRACED_FIELDS)
    assert cfg.replace(lr=0.5).lr.dtype == np.float32
    assert cfg.replace(num_envs=8).num_envs == 8


def test_to_dict_round_trip():
    cfg = PPOConfig(env="Pendulum-v1", lr=3e-4, hidden_sizes=(32, 16), anneal_lr=False)
    again = PPOConfig.from_dict(cfg.to_dict())
    assert again.to_dict() == cfg.to_dict()
    with pytest.raises(ConfigError, match="clip_eps"):
        PPOConfig.from_dict({"clip_epsilon": 0.1})


@pytest.mark.parametrize(
    "overrides,message",
    [
        ({"env": "CartPole-v2"}, "CartPole-v1"),
        ({"env": "Pendullum-v1"}, "Pendulum-v1"),
        ({"num_minibatches": 3}, "num_minibatches"),
        ({"num_envs": 0}, "num_envs must be a positive integer"),
        ({"num_steps": -4}, "num_steps must be a positive integer"),
        ({"update_epochs": 0}, "update_epochs"),
        ({"total_timesteps": 100}, "smaller than one batch"),
        ({"clip_eps": 0.0}, "clip_eps must be > 0"),
        ({"clip_eps": -0.1}, "clip_eps must be > 0"),
        ({"vf_clip_eps": 0.0}, "vf_clip_eps"),
        ({"gamma": 1.5}, "gamma must be <= 1"),
        ({"gamma": -0.1}, "gamma must be >= 0"),
        ({"gae_lambda": 1.01}, "gae_lambda must be <= 1"),
        ({"lr": 0.0}, "lr must be > 0"),
        ({"lr": float("nan")}, "lr is NaN"),
        ({"ent_coef": -0.01}, "ent_coef must be >= 0"),
        ({"max_grad_norm": 0.0}, "max_grad_norm"),
        ({"hidden_sizes": ()}, "hidden_sizes"),
        ({"activation": "tahn"}, "tanh"),
    ],
)
def test_bad_config_raises_clear_error(overrides, message):
    with pytest.raises(ConfigError, match=message):
        validate(PPOConfig(**overrides))


def test_train_validates_before_tracing():
    with pytest.raises(ConfigError, match="num_minibatches"):
        jax.jit(train)(PPOConfig(num_minibatches=7), jax.random.key(0))


def test_stacked_leaves_are_validated_elementwise():
    good = PPOConfig(clip_eps=np.array([0.1, 0.2], np.float32))
    validate(good)
    with pytest.raises(ConfigError, match="clip_eps"):
        validate(PPOConfig(clip_eps=np.array([0.1, 0.0], np.float32)))


def test_infinite_grad_clip_allowed():
    validate(PPOConfig(max_grad_norm=float("inf")))
