"""Sweep specs, grouping, chunking and parts: expansion against hand-written expectations; every bad input.

Nothing here compiles a training program; the whole file runs in a few seconds.
"""

from __future__ import annotations

import math
import subprocess
import sys
import zlib

import numpy as np
import pytest

from ppo_jax import PPOConfig, SpecError
from ppo_jax.cli import main
from ppo_jax.lm.config import PRETRAIN_FIELDS, LmConfig, RlhfConfig
from ppo_jax.lm.task import LM, RLHF
from ppo_jax.rl import brax_envs
from ppo_jax.rl.task import PPO
from ppo_jax.sweep.plan import balanced_chunk_size, group_pairs, make_chunks, parse_bytes, parse_part, part_slice
from ppo_jax.sweep.spec import from_dict, load_spec
from ppo_jax.sweep.spec_yaml import parse_yaml
from tests.helpers import ROOT

BASE = {"total_timesteps": 1024, "num_envs": 2, "num_steps": 64, "num_minibatches": 2, "update_epochs": 1}
RLHF_BASE = {"num_updates": 4, "sft_steps": 10, "rm_steps": 10, "hidden_dim": 16}


def combos(spec):
    """(setting_id, env, values) of every setting, in order."""
    return [(s.setting_id, s.env, s.values) for s in spec.settings]


# ----------------------------------------------------------------------------- expansion


def test_grid_is_the_cartesian_product_with_the_last_axis_fastest_and_envs_outermost():
    spec = from_dict(
        {
            "base": BASE,
            "envs": ["CartPole-v1", "Acrobot-v1"],
            "seeds": 3,
            "grid": {"clip_eps": [0.1, 0.2], "ent_coef": [0.0, 0.01, 0.02]},
        }
    )
    expected = [
        {"clip_eps": 0.1, "ent_coef": 0.0},
        {"clip_eps": 0.1, "ent_coef": 0.01},
        {"clip_eps": 0.1, "ent_coef": 0.02},
        {"clip_eps": 0.2, "ent_coef": 0.0},
        {"clip_eps": 0.2, "ent_coef": 0.01},
        {"clip_eps": 0.2, "ent_coef": 0.02},
    ]
    assert combos(spec) == [(i, env, v) for env in ("CartPole-v1", "Acrobot-v1") for i, v in enumerate(expected)]
    assert spec.seeds == (0, 1, 2) and spec.axes == ("clip_eps", "ent_coef") and spec.num_combos == 6
    # Each config is the base with the swept values: float32 leaves, everything else from base.
    setting = spec.settings[10]  # Acrobot, clip_eps 0.2, ent_coef 0.01
    assert setting.cfg == PPOConfig(**BASE, env="Acrobot-v1", clip_eps=0.2, ent_coef=0.01)
    assert setting.cfg.clip_eps.dtype == np.float32 and spec.task is PPO
    assert (spec.pretrain_seed, spec.pretrain_per_setting) == (0, False)  # PPO runs share nothing


def test_zip_pairs_lists_and_multiplies_with_the_grid():
    spec = from_dict(
        {"base": BASE, "grid": {"clip_eps": [0.1, 0.2]}, "zip": {"lr": [1e-3, 3e-4], "ent_coef": [0.0, 0.01]}}
    )
    assert [s.values for s in spec.settings] == [
        {"clip_eps": 0.1, "lr": 0.001, "ent_coef": 0.0},
        {"clip_eps": 0.1, "lr": 0.0003, "ent_coef": 0.01},
        {"clip_eps": 0.2, "lr": 0.001, "ent_coef": 0.0},
        {"clip_eps": 0.2, "lr": 0.0003, "ent_coef": 0.01},
    ]
    assert spec.seeds == (0,) and spec.envs == ("CartPole-v1",)


def test_random_axes_follow_the_documented_generator():
    raw = {
        "base": BASE,
        "random": {
            "num_samples": 5,
            "seed": 3,
            "axes": {
                "lr": {"log_uniform": [1e-5, 1e-2]},
                "ent_coef": {"uniform": [0, 0.1]},
                "num_minibatches": {"choice": [1, 2, 4]},
                "update_epochs": {"int_uniform": [1, 3]},
            },
        },
    }
    spec = from_dict(raw)

    def rng(name):  # the generator the spec format documents
        return np.random.default_rng([3, zlib.crc32(name.encode())])

    lr = np.exp(rng("lr").uniform(math.log(1e-5), math.log(1e-2), 5)).astype(np.float32)
    ent = rng("ent_coef").uniform(0, 0.1, 5).astype(np.float32)
    minibatches = np.array([1, 2, 4])[rng("num_minibatches").integers(0, 3, 5)]
    epochs = rng("update_epochs").integers(1, 4, 5)
    for i, s in enumerate(spec.settings):
        assert np.float32(s.values["lr"]) == lr[i] and s.cfg.lr == lr[i]
        assert np.float32(s.values["ent_coef"]) == ent[i]
        assert s.values["num_minibatches"] == minibatches[i] and s.cfg.update_epochs == epochs[i]
    # Adding an axis leaves the samples of the others as they were; another seed changes them.
    raw["random"]["axes"]["gamma"] = {"uniform": [0.9, 0.999]}
    assert [s.values["lr"] for s in from_dict(raw).settings] == [s.values["lr"] for s in spec.settings]
    raw["random"]["seed"] = 4
    assert [s.values["lr"] for s in from_dict(raw).settings] != [s.values["lr"] for s in spec.settings]


def test_log_uniform_is_uniform_in_log_space():
    spec = from_dict(
        {
            "base": BASE,
            "random": {
                "num_samples": 4000,
                "axes": {"lr": {"log_uniform": [1e-6, 1e-2]}, "ent_coef": {"uniform": [0.0, 1.0]}},
            },
        }
    )
    lr = np.array([s.values["lr"] for s in spec.settings])
    ent = np.array([s.values["ent_coef"] for s in spec.settings])
    assert lr.min() >= 1e-6 and lr.max() <= 1e-2 and ent.min() >= 0 and ent.max() <= 1
    # Each decade of [1e-6, 1e-2] holds a quarter of the log-uniform samples.
    decades = np.histogram(np.log10(lr), bins=[-6, -5, -4, -3, -2])[0] / len(lr)
    np.testing.assert_allclose(decades, 0.25, atol=0.03)
    assert abs(np.mean(ent < 0.5) - 0.5) < 0.03


def test_yaml_floats_follow_yaml_1_2_and_values_are_float32_exact(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(
        "base: {total_timesteps: 5e5}\nzip:\n  lr: [1e-3, 2.5E-4]\n  max_grad_norm: [.inf, 0.5]\nseeds: 2\n"
    )
    spec = load_spec(path)
    assert spec.base.total_timesteps == 500_000 and isinstance(spec.base.total_timesteps, int)
    assert [s.values["lr"] for s in spec.settings] == [0.001, 0.00025]  # not the strings PyYAML 1.1 makes
    assert spec.settings[0].cfg.lr == np.float32(1e-3) and math.isinf(spec.settings[0].values["max_grad_norm"])
    assert spec.name == "s" and spec.text == path.read_text()


def test_hidden_sizes_and_bools_as_axes():
    spec = from_dict({"base": BASE, "grid": {"hidden_sizes": [[32], [64, 64]], "norm_adv": [True, False]}})
    assert [s.cfg.hidden_sizes for s in spec.settings] == [(32,), (32,), (64, 64), (64, 64)]
    assert [s.cfg.norm_adv for s in spec.settings] == [True, False, True, False]


# ----------------------------------------------------------------------------- RLHF specs and refused axes


def test_rlhf_grid_over_beta_and_clip_eps():
    spec = from_dict(
        {"task": "rlhf", "base": RLHF_BASE, "seeds": 3, "grid": {"beta": [0.0, 0.1], "clip_eps_low": [0.1, 0.2]}}
    )
    assert spec.task is RLHF and spec.envs == ("copy",) and spec.axes == ("beta", "clip_eps_low")
    assert [s.values for s in spec.settings] == [
        {"beta": 0.0, "clip_eps_low": 0.1},
        {"beta": 0.0, "clip_eps_low": 0.2},
        {"beta": 0.1, "clip_eps_low": 0.1},
        {"beta": 0.1, "clip_eps_low": 0.2},
    ]
    setting = spec.settings[3]
    assert setting.cfg == RlhfConfig(**RLHF_BASE, beta=0.1, clip_eps_low=0.2) and setting.cfg.beta.dtype == np.float32
    assert [s.env for s in spec.settings] == ["copy"] * 4 and spec.seeds == (0, 1, 2)
    assert spec.canonical["task"] == "rlhf" and spec.canonical["pretrain"] == {"seed": 0, "per_setting": False}
    groups = group_pairs(spec)  # traced leaves only: one program for all 12 runs
    assert len(groups) == 1 and len(groups[0].pairs) == 12


def test_rlhf_static_fields_are_axes_and_split_the_programs():
    spec = from_dict(
        {
            "task": "rlhf",
            "base": RLHF_BASE,
            "grid": {"hidden_dim": [16, 32], "beta": [0.0, 0.1]},
            "pretrain": {"seed": 5},
        }
    )
    assert [s.cfg.hidden_dim for s in spec.settings] == [16, 16, 32, 32]
    assert [g.static for g in group_pairs(spec)] == [{}, {"hidden_dim": 32}]  # base hidden_dim 16
    assert spec.pretrain_seed == 5 and not spec.pretrain_per_setting


def test_rlhf_pretraining_field_as_an_axis_needs_per_setting():
    """The bug the redesign fixes: one pretrained model shared by settings that claim different sft_lr."""
    raw = {"task": "rlhf", "base": RLHF_BASE, "grid": {"sft_lr": [0.00001, 0.01]}}
    with pytest.raises(SpecError) as error:
        from_dict(raw)
    assert "only affects pretraining" in str(error.value) and "per_setting" in str(error.value), str(error.value)
    spec = from_dict({**raw, "pretrain": {"per_setting": True}})
    assert len(spec.settings) == 2 and spec.pretrain_per_setting
    assert [s.cfg.sft_lr for s in spec.settings] == [np.float32(1e-5), np.float32(0.01)]
    assert spec.canonical["pretrain"] == {"seed": 0, "per_setting": True}


PRETRAIN_AXES = {
    "sft_lr": [1e-3, 1e-2],
    "rm_lr": [1e-3, 1e-2],
    "demo_noise": [0.1, 0.5],
    "bt_temperature": [0.1, 1.0],
    "sft_steps": [10, 20],
    "rm_steps": [10, 20],
    "pretrain_batch": [16, 32],
    "sft_target_accuracy": [0.2, 0.5],
    "sft_eval_every": [5, 10],
}


@pytest.mark.parametrize("name", sorted(PRETRAIN_AXES))
def test_every_pretraining_field_is_refused_as_a_shared_axis(name):
    assert set(PRETRAIN_AXES) == set(PRETRAIN_FIELDS) == set(RLHF.shared_fields)
    for block in ("grid", "zip"):
        with pytest.raises(SpecError, match="only affects pretraining"):
            from_dict({"task": "rlhf", "base": RLHF_BASE, block: {name: PRETRAIN_AXES[name]}})
    spec = from_dict(
        {"task": "rlhf", "base": RLHF_BASE, "grid": {name: PRETRAIN_AXES[name]}, "pretrain": {"per_setting": True}}
    )
    assert [s.values[name] for s in spec.settings] == PRETRAIN_AXES[name]
    # Fixed under base:, a pretraining field is fine: every setting shares it.
    assert from_dict({"task": "rlhf", "base": {**RLHF_BASE, name: PRETRAIN_AXES[name][1]}}).settings


def test_an_axis_the_switches_ignore_is_refused():
    raw = {"base": BASE, "grid": {"kl_beta": [0.1, 1.0]}}  # objective clip has no KL penalty
    with pytest.raises(SpecError) as error:
        from_dict(raw)
    assert "would train the same run" in str(error.value) and "kl_beta" in str(error.value), str(error.value)
    spec = from_dict({**raw, "base": {**BASE, "objective": "kl_fixed"}})
    assert [s.cfg.kl_beta for s in spec.settings] == [np.float32(0.1), np.float32(1.0)]
    # Settings that differ in a used field besides the inert one are distinct runs.
    mixed = from_dict({"base": BASE, "zip": {"kl_beta": [0.1, 1.0], "clip_eps": [0.1, 0.2]}})
    assert len(mixed.settings) == 2


# ----------------------------------------------------------------------------- grouping, chunks, parts


def test_settings_group_by_static_fields_only():
    spec = from_dict(
        {
            "base": BASE,
            "envs": ["CartPole-v1", "Acrobot-v1"],
            "seeds": [5, 9],
            "grid": {"hidden_sizes": [[32], [64]], "clip_eps": [0.1, 0.2], "gamma": [0.9, 0.99]},
        }
    )
    groups = group_pairs(spec)
    # 2 envs x 2 network sizes = 4 programs; clip_eps and gamma vary inside each.
    assert [g.static for g in groups] == [
        {"hidden_sizes": "32"},
        {"hidden_sizes": "64"},
        {"env": "Acrobot-v1", "hidden_sizes": "32"},
        {"env": "Acrobot-v1", "hidden_sizes": "64"},
    ]
    # settings: env-major, then hidden (outer), clip_eps, gamma -> indices 0-3 have hidden 32 on CartPole
    assert groups[0].pairs == tuple((i, seed) for i in range(4) for seed in (5, 9))
    assert groups[1].pairs == tuple((i, seed) for i in range(4, 8) for seed in (5, 9))
    assert groups[3].pairs[0] == (12, 5)
    for g in groups:
        assert len({spec.settings[i].cfg.clip_eps.item() for i, _ in g.pairs}) == 2
    only_traced = from_dict({"base": BASE, "grid": {"lr": [1e-4, 1e-3], "clip_eps": [0.1, 0.2, 0.3]}, "seeds": 4})
    assert len(group_pairs(only_traced)) == 1 and len(group_pairs(only_traced)[0].pairs) == 24


def test_chunk_sizes_are_balanced_multiples_of_the_device_count():
    assert balanced_chunk_size(100, 64) == 50  # two chunks of 50, not 64 + 36
    assert balanced_chunk_size(100, 64, 4) == 52  # 50 rounded up to 4 devices
    assert balanced_chunk_size(6, 100, 4) == 8  # one chunk, 2 pairs of padding
    assert balanced_chunk_size(7, 2) == 2 and balanced_chunk_size(7, 3) == 3  # ceil(7/3) = 3 chunks of 3
    assert balanced_chunk_size(5, 1, 4) == 4  # never below one pair per device
    spec = from_dict(
        {"base": BASE, "grid": {"clip_eps": [0.1, 0.2, 0.3]}, "envs": ["CartPole-v1", "Acrobot-v1"], "seeds": 3}
    )
    chunks = make_chunks(group_pairs(spec), [4, 9])
    assert [(c.chunk_id, len(c.pairs)) for c in chunks] == [
        ("g000-c00000", 4),
        ("g000-c00001", 4),
        ("g000-c00002", 1),
        ("g001-c00000", 9),
    ]
    assert chunks[1].pairs == ((1, 1), (1, 2), (2, 0), (2, 1))


def test_memory_fit_finds_the_fewest_chunks_that_fit(monkeypatch):
    """The search in fit_program, with a fake compiler whose estimate is 1000 + 10 * pairs bytes per device."""
    from types import SimpleNamespace

    from ppo_jax.sweep import program as sweep_program

    compiled = []
    how = sweep_program.Shared("none")

    def fake_compile(task, cfg, size, mesh, log_every, shared):
        assert task is PPO and shared == how
        compiled.append(size)
        return sweep_program.Program(None, size, 0.0, 1000 + 10 * size)

    monkeypatch.setattr(sweep_program, "compile_program", fake_compile)
    mesh = SimpleNamespace(size=4)
    # 100 pairs on 4 devices under 1500 bytes: 1 chunk of 100 (2000) and 2 of 52 (1520) are over;
    # 3 chunks of 36 (1360) fit. 36, not 48: the pairs are spread evenly over the 3 chunks.
    program = sweep_program.fit_program(PPO, PPOConfig(), 100, 1500, mesh, 1, how)
    assert program.size == 36 and compiled == [100, 52, 36]
    compiled.clear()
    assert sweep_program.fit_program(PPO, PPOConfig(), 6, 10**6, mesh, 1, how).size == 8  # all in one
    assert compiled == [8]
    with pytest.raises(SpecError, match="over the memory budget"):
        sweep_program.fit_program(PPO, PPOConfig(), 100, 1030, mesh, 1, how)  # not even 1 pair per device fits


def test_parts_are_contiguous_disjoint_and_cover_every_chunk():
    assert [list(part_slice(10, (i, 3))) for i in range(3)] == [[0, 1, 2], [3, 4, 5], [6, 7, 8, 9]]
    assert [list(part_slice(2, (i, 4))) for i in range(4)] == [[], [0], [], [1]]
    assert list(part_slice(5, None)) == [0, 1, 2, 3, 4]
    assert parse_part("3/8") == (3, 8) and parse_part(None) is None
    for bad in ("8/8", "-1/2", "1", "a/b"):
        with pytest.raises(SpecError, match="0 <= i < N"):
            parse_part(bad)
    assert parse_bytes("8GiB") == parse_bytes("8G") == 8 * 2**30 and parse_bytes("500MB") == 500 * 10**6
    assert parse_bytes("2e9") == 2 * 10**9
    with pytest.raises(SpecError, match="--memory-budget"):
        parse_bytes("lots")


def test_example_specs_load():
    for path in sorted((ROOT / "experiments").glob("*.yaml")):  # PPO and RLHF specs alike
        if "brax" in path.name and not brax_envs.available():
            continue  # test_brax_specs_load
        spec = load_spec(path)
        task = RLHF if path.name.startswith("rlhf_") else LM if path.name.startswith("lm_") else PPO
        assert spec.settings and spec.task is task, path
    clip = load_spec(ROOT / "experiments" / "clip_eps_quick.yaml")
    assert len(clip.settings) * len(clip.seeds) == 288 and len(group_pairs(clip)) == 12  # 6 envs x (clip, unclipped)
    assert [s.values["clip_eps"] for s in clip.settings[:5]] == [0.05, 0.1, 0.2, 0.3, 0.5]
    pendulum = [s.cfg for s in clip.settings if s.env == "Pendulum-v1"]
    assert all(c.num_envs == 8 and c.update_epochs == 10 and float(c.ent_coef) == 0.0 for c in pendulum)  # env_base
    assert all(
        c.num_envs == 4 and float(c.ent_coef) == np.float32(0.01)
        for c in (s.cfg for s in clip.settings if s.env == "CartPole-v1")
    )
    tiny = load_spec(ROOT / "experiments" / "clip_eps_tiny.yaml")
    assert len(tiny.settings) == 3 and tiny.seeds == (0, 7) and tiny.base.num_updates == 8
    random = load_spec(ROOT / "experiments" / "lr_ent_random.yaml")
    assert len(random.settings) == 64 and len(group_pairs(random)) == 2 and random.log_every == 5
    # The RLHF frontier (beta x a symmetric clip range), a sweep of task rlhf: one program, pretraining shared.
    quick = load_spec(ROOT / "experiments" / "rlhf_frontier_quick.yaml")
    assert quick.axes == ("beta", "clip_eps_low", "clip_eps_high") and len(quick.settings) * len(quick.seeds) == 60
    assert sorted({s.values["clip_eps_low"] for s in quick.settings}) == [0.1, 0.15, 0.2, 0.3]
    assert all(s.values["clip_eps_low"] == s.values["clip_eps_high"] for s in quick.settings)
    assert len(group_pairs(quick)) == 1 and (quick.pretrain_seed, quick.pretrain_per_setting) == (0, False)
    paper = load_spec(ROOT / "experiments" / "rlhf_frontier.yaml")
    assert sorted({s.values["clip_eps_low"] for s in paper.settings}) == [0.1, 0.15, 0.2, 0.3]


def test_brax_specs_load_with_the_mujoco_preset_and_per_env_backends():
    pytest.importorskip("brax", reason='Brax tasks need the optional extra: pip install -e ".[brax]"')
    from ppo_jax.rl.presets import apply_preset

    paper = load_spec(ROOT / "experiments" / "objectives_brax.yaml")
    assert len(paper.envs) == 7 and len(paper.settings) == 7 * 13 and paper.seeds == (0, 1, 2)
    hopper = next(s.cfg for s in paper.settings if s.env == "brax/hopper" and s.setting_id == 2)  # clip, eps 0.2
    assert hopper == apply_preset("mujoco", hopper)  # the base is --preset mujoco, value for value
    backends = {s.env: s.cfg.brax_backend for s in paper.settings}
    assert backends["brax/swimmer"] == "generalized" and backends["brax/hopper"] == "spring"
    cpu = load_spec(ROOT / "experiments" / "objectives_brax_cpu.yaml")
    assert cpu.base == paper.base and cpu.envs == (
        "brax/inverted_pendulum",
        "brax/inverted_double_pendulum",
        "brax/hopper",
    )
    for name, axis in (("clip_eps_brax", "clip_eps"), ("ent_coef_brax", "ent_coef")):
        sensitivity = load_spec(ROOT / "experiments" / f"{name}.yaml")
        assert axis in sensitivity.axes and len(sensitivity.envs) == 4 and len(sensitivity.settings) == 4 * 6
        assert all(s.cfg.num_steps == 2048 and s.cfg.update_epochs == 10 for s in sensitivity.settings)


# ----------------------------------------------------------------------------- bad input


BAD_SPECS = [
    # (spec YAML, what the message must say)
    (
        "grid:\n  clip_epsilon: [0.1, 0.2]\n",
        ["line 2", "unknown PPOConfig field 'clip_epsilon'", "Did you mean: clip_eps"],
    ),
    ("gird:\n  clip_eps: [0.1]\n", ["unknown spec key 'gird'", "Did you mean: grid"]),
    ("clip_eps: [0.1]\n", ["unknown spec key 'clip_eps'", "under base: or an axis"]),
    (
        "grid:\n  progress: [true, false]\n",
        ["line 2", "not a config field any more", "--no-progress"],
    ),  # a CLI flag now
    ("grid:\n  anneal_lr: [true, false]\n", ["line 2", "anneal_lr became lr_schedule", "constant"]),
    ("grid:\n  kl_beta: [0.1, 1.0]\n", ["would train the same run", "kl_beta is ignored", "kl_fixed"]),
    ("task: rlhf\ngrid:\n  sft_lr: [1e-5, 1e-2]\n", ["line 3", "only affects pretraining", "per_setting"]),
    ("task: rlhf\nenvs: [CartPole-v1]\n", ["task rlhf has no environment"]),
    ("pretrain: {seed: 1}\n", ["task ppo shares nothing", "remove pretrain"]),
    ("task: rlhf\npretrain: {sed: 1}\n", ["unknown key 'sed'", "Did you mean: seed"]),
    ("task: rlhff\n", ["unknown task 'rlhff'", "Did you mean: rlhf"]),
    (
        "task: rlhf\npretrain: {per_setting: true}\nbase: {reward_model: programmatic}\ngrid:\n  rm_lr: [1e-3, 1e-2]\n",
        ["would train the same run", "rm_lr is ignored", "reward_model: programmatic"],
    ),
    ("task: rlhf\ngrid:\n  beta: [-1.0]\n", ["line 3", "grid.beta[0]", "beta must be >= 0"]),
    ("task: rlhf\nbase:\n  betta: 0.1\n", ["line 3", "unknown RlhfConfig field 'betta'", "Did you mean: beta"]),
    ("task: rlhf\ngird:\n  beta: [0.1]\n", ["unknown spec key 'gird'", "Did you mean: grid"]),
    ("grid:\n  seed: [1, 2]\n", ["top-level `seeds:`"]),
    ("grid:\n  clip_eps: []\n", ["line 2", "axis clip_eps is empty"]),
    ("grid:\n  clip_eps: 0.2\n", ["an axis is a list of values", "put it under base"]),
    ("grid:\n  clip_eps:\n    - 0.1\n    - -0.2\n", ["line 4", "grid.clip_eps[1]", "clip_eps must be > 0"]),
    ("base:\n  gamma: 1.5\n", ["base.gamma", "gamma must be <= 1"]),
    ("grid:\n  lr: [fast]\n", ["lr must be a number, got 'fast'"]),
    ("grid:\n  num_minibatches: [3]\n", ["num_minibatches=3", "Choose num_minibatches"]),
    ("zip:\n  lr: [0.1, 0.2]\n  ent_coef: [0.0]\n", ["equal lengths", "'lr': 2", "'ent_coef': 1"]),
    ("grid:\n  clip_eps: [0.1]\nzip:\n  clip_eps: [0.2]\n", ["line 4", "clip_eps is already swept in grid"]),
    ("grid:\n  env: [Acrobot-v1]\nenvs: [CartPole-v1]\n", ["line 2", "env cannot be swept", "env_base:"]),
    ("envs: [CartPole-v1]\nenv_base:\n  Acrobot-v1: {lr: 1e-3}\n", ["line 3", "not under envs"]),
    ("envs: [CartPole-v1]\nenv_base:\n  CartPole-v1: {lr: -1}\n", ["env_base.CartPole-v1", "lr must be > 0"]),
    ("envs: [CartPole-v1]\ngrid:\n  lr: [1e-3]\nenv_base:\n  CartPole-v1: {lr: 1e-3}\n", ["lr is swept in grid"]),
    ("envs: [CartPole-v2]\n", ["unknown environment 'CartPole-v2'", "CartPole-v1"]),
    ("seeds: 0\n", ["seeds must be a positive count"]),
    ("seeds: [1, 1]\n", ["distinct"]),
    ("random:\n  num_samples: 4\n  axes:\n    lr: {log_uniform: [0, 1e-3]}\n", ["line 4", "log_uniform needs low > 0"]),
    (
        "random:\n  num_samples: 4\n  axes:\n    num_envs: {uniform: [1, 8]}\n",
        ["uniform needs a float field", "choice"],
    ),
    ("random:\n  axes:\n    lr: {uniform: [1e-4, 1e-3]}\n", ["num_samples must be an integer >= 1"]),
    ("grid:\n  clip_eps: [0.1]\n  clip_eps: [0.2]\n", ["line 3", "appears twice"]),
    ("grid:\n  clip_eps: [0.1, 0.2\nseeds: 2\n", ["line 3", "malformed YAML", "started on line 2"]),
    ("- just a list\n", ["a spec is a mapping"]),
]


@pytest.mark.parametrize("text, expected", BAD_SPECS, ids=[f"bad{i}" for i in range(len(BAD_SPECS))])
def test_bad_specs_give_clear_errors_and_exit_2(text, expected, tmp_path, capsys):
    path = tmp_path / "bad.yaml"
    base = RLHF_BASE if text.startswith("task: rlhf\n") else BASE
    path.write_text(text + ("" if "base:" in text or text.startswith("-") else f"base: {base}\n"))
    with pytest.raises(SpecError) as error:
        load_spec(path)
    for part in expected:
        assert part in str(error.value), str(error.value)
    assert str(error.value).startswith(str(path))
    # The command line: exit 2, "error: ..." on stderr, nothing written, no traceback.
    out = tmp_path / "out"
    assert main(["sweep", str(path), "--out", str(out)]) == 2
    stderr = capsys.readouterr().err
    assert stderr.startswith("error: ") and expected[-1] in stderr and "Traceback" not in stderr
    assert not out.exists()


def test_cli_process_exits_2_without_a_traceback(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("grid:\n  clip_eps: [0.1\n")
    proc = subprocess.run(
        [sys.executable, "-m", "ppo_jax.cli", "sweep", str(path), "--dry-run"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "malformed YAML" in proc.stderr and "Traceback" not in proc.stderr


def test_cli_refusals_before_anything_runs(tmp_path, capsys):
    spec = ROOT / "experiments" / "clip_eps_tiny.yaml"
    cases = [
        (["sweep", str(tmp_path / "missing.yaml"), "--out", str(tmp_path / "a")], "cannot read spec"),
        (["sweep", str(spec)], "--out DIR is required"),
        (["sweep", str(spec), "--out", str(tmp_path / "b"), "--part", "2/2"], "0 <= i < N"),
        (["sweep", str(spec), "--out", str(tmp_path / "c"), "--memory-budget", "lots"], "--memory-budget"),
        (["sweep", str(spec), "--out", str(tmp_path / "d"), "--chunk-size", "0"], "--chunk-size must be a positive"),
        (["sweep", str(spec), "--out", str(tmp_path / "e"), "--force", "--resume"], "cannot be combined"),
    ]
    (tmp_path / "keep").mkdir()
    (tmp_path / "keep" / "notes.txt").write_text("mine")
    cases.append((["sweep", str(spec), "--out", str(tmp_path / "keep"), "--force"], "not a ppo-jax run directory"))
    for args, message in cases:
        assert main(args) == 2, args
        stderr = capsys.readouterr().err
        assert stderr.startswith("error: ") and message in stderr, (args, stderr)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep"] and (tmp_path / "keep" / "notes.txt").exists()


def test_line_numbers_of_parsed_yaml():
    data, lines = parse_yaml("base:\n  lr: 1e-3\ngrid:\n  clip_eps:\n    - 0.1\n    - 0.2\n")
    assert data == {"base": {"lr": 0.001}, "grid": {"clip_eps": [0.1, 0.2]}}
    assert lines[("base", "lr")] == 2 and lines[("grid", "clip_eps", 1)] == 6


def test_only_envs_keeps_the_settings_of_the_envs_it_keeps():
    from ppo_jax.sweep.spec import only_envs

    full = load_spec(ROOT / "experiments" / "clip_eps.yaml")
    kept = only_envs(full, ["Pendulum-v1", "CartPole-v1"])
    assert kept.envs == ("CartPole-v1", "Pendulum-v1") and kept.seeds == full.seeds and kept.axes == full.axes
    expected = {(s.env, s.setting_id): s.cfg for s in full.settings if s.env in kept.envs}
    assert {(s.env, s.setting_id): s.cfg for s in kept.settings} == expected  # env_base (Pendulum's 1M steps) kept
    assert kept.canonical["env_base"].keys() == {"Pendulum-v1"}
    with pytest.raises(SpecError, match="--envs Walker: choose from the spec's envs: CartPole-v1, Acrobot-v1"):
        only_envs(full, ["Walker"])


def test_a_preset_axis_sets_each_presets_fields_and_other_axes_win():
    from ppo_jax.lm.presets import apply_preset

    base = {"digits": 2, "num_updates": 4}
    spec = from_dict({"task": "lm", "base": base, "grid": {"preset": ["grpo", "dapo", "gspo"], "lr": [1e-4, 3e-4]}})
    assert spec.task is LM and spec.axes == ("preset", "lr")
    plain = LmConfig(**base)
    for setting in spec.settings:
        expected = apply_preset(setting.values["preset"], plain).replace(lr=np.float32(setting.values["lr"]))
        assert setting.cfg == expected
    assert float(spec.settings[2].cfg.clip_eps_high) == pytest.approx(0.28)  # dapo
    assert [g.static.get("ratio") for g in group_pairs(spec)].count("sequence") == 1  # gspo: a program of its own
    over = from_dict({"task": "lm", "base": base, "grid": {"preset": ["dapo"], "clip_eps_high": [0.32]}})
    assert float(over.settings[0].cfg.clip_eps_high) == pytest.approx(0.32)  # an axis wins over the preset
    in_base = from_dict({"task": "lm", "base": {**base, "preset": "dapo", "clip_eps_high": 0.3}})
    assert in_base.settings[0].cfg.dynamic_sampling and float(in_base.settings[0].cfg.clip_eps_high) == pytest.approx(
        0.3
    )  # base fields win over base's preset
    with pytest.raises(SpecError, match="unknown preset 'grp'.*Did you mean: grpo"):
        from_dict({"task": "lm", "base": base, "grid": {"preset": ["grp"]}})
