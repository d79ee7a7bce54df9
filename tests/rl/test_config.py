"""PPOConfig construction and the validation that runs before anything compiles."""

import jax
import numpy as np
import pytest

from ppo_jax import ConfigError, PPOConfig, validate
from ppo_jax.config_fields import field_names, static_fields, traced_fields
from ppo_jax.rl.train import train

TRACED_FIELDS = traced_fields(PPOConfig)


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
    cfg = PPOConfig(env="Pendulum-v1", lr=3e-4, hidden_sizes=(32, 16), lr_schedule="constant")
    again = PPOConfig.from_dict(cfg.to_dict())
    assert again.to_dict() == cfg.to_dict()
    assert list(cfg.to_dict()) == list(field_names(PPOConfig)) and cfg.to_dict()["lr"] == 3e-4
    with pytest.raises(ConfigError, match="clip_eps"):
        PPOConfig.from_dict({"clip_epsilon": 0.1})


def test_traced_and_static_fields_are_read_off_the_dataclass():
    assert set(TRACED_FIELDS) | set(static_fields(PPOConfig)) == set(field_names(PPOConfig))
    assert not set(TRACED_FIELDS) & set(static_fields(PPOConfig))
    assert {"lr", "clip_eps", "gamma", "kl_beta"} <= set(TRACED_FIELDS)
    assert {"env", "num_envs", "hidden_sizes", "lr_schedule", "objective"} <= set(static_fields(PPOConfig))
    assert "progress" not in field_names(PPOConfig) and "anneal_lr" not in field_names(PPOConfig)


def test_from_dict_reads_the_legacy_field_names():
    """Run and sweep directories written before the redesign: anneal_lr -> lr_schedule, progress dropped."""
    assert PPOConfig.from_dict({"anneal_lr": True, "progress": True}) == PPOConfig(lr_schedule="linear")
    assert PPOConfig.from_dict({"anneal_lr": False, "progress": False}).lr_schedule == "constant"
    # A new name given alongside the old one wins.
    assert PPOConfig.from_dict({"anneal_lr": True, "lr_schedule": "constant"}).lr_schedule == "constant"
    with pytest.raises(ConfigError, match="unknown PPOConfig field 'progres'"):
        PPOConfig.from_dict({"progres": True})


def test_inert_fields_name_what_the_switches_ignore():
    inert = PPOConfig().inert_fields()  # objective clip, no normalization, no early stopping, clip_vloss on
    assert set(inert) == {
        "obs_clip",
        "reward_clip",
        "kl_beta",
        "kl_target",
        "dual_clip_c",
        "target_kl",
        "clip_kl_target",
        "brax_backend",
        "rnn_hidden_size",  # network mlp has no recurrent layer
    }
    assert "brax_backend" not in PPOConfig(env="brax/hopper").inert_fields()
    assert "rnn_hidden_size" not in PPOConfig(network="lstm").inert_fields()
    assert "kl_fixed" in inert["kl_beta"]
    assert "kl_beta" not in PPOConfig(objective="kl_fixed").inert_fields()
    kl_adaptive = PPOConfig(objective="kl_adaptive").inert_fields()
    assert "kl_beta" not in kl_adaptive and "kl_target" not in kl_adaptive and "clip_eps" in kl_adaptive
    assert "vf_clip_eps" in PPOConfig(clip_vloss=False).inert_fields()
    everything_on = PPOConfig(
        objective="dual_clip",
        normalize_obs=True,
        normalize_reward=True,
        early_stop_kl=True,
        adaptive_clip=True,
        network="gru",
    ).inert_fields()
    assert set(everything_on) == {"kl_beta", "kl_target", "brax_backend"}


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
        ({"lr_schedule": "cosine"}, "unknown lr_schedule 'cosine'"),
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
