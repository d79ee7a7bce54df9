"""``--mesh``: the logical-axis rules (hand-written expectations), bad meshes refused before compiling, and a run on
4 simulated devices (data=2, fsdp=2) equal to the same run on one device, its parameters really split.

Cost on 2 shared CPU cores (measured): the unit tests ~25 s; the 4-device run ~2 min (a subprocess: XLA_FLAGS must
be set before JAX starts; two compiles of a 1-layer decoder, ~45 s each). The 2-process ``jax.distributed`` run
(~4.5 min) and the sharded 8-seed sweep (~3.5 min) are behind PPO_JAX_TEST_MULTIHOST=1, as tests/sweep/test_run.py's
distributed test is.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import jax
import numpy as np
import pandas as pd
import pytest
from jax.sharding import PartitionSpec as P

from ppo_jax import sweep
from ppo_jax.errors import ConfigError, SpecError
from ppo_jax.lm import decoder, sharding
from ppo_jax.lm.config import LmConfig
from ppo_jax.lm.decoder_config import DecoderConfig
from ppo_jax.lm.validation import validate
from ppo_jax.optimizer import create_train_state
from tests.helpers import faked_slurm_step

MULTIHOST = pytest.mark.skipif(
    not os.environ.get("PPO_JAX_TEST_MULTIHOST"), reason="minutes; set PPO_JAX_TEST_MULTIHOST=1 to run"
)

# A Qwen2-like decoder with every optional parameter: L=2, D=16, H=4 x Dh=4, K=2, F=32, V=32, untied head.
CONFIG = DecoderConfig(
    model_type="qwen2",
    vocab_size=32,
    hidden_size=16,
    intermediate_size=32,
    num_layers=2,
    num_heads=4,
    num_kv_heads=2,
    head_dim=4,
    max_position_embeddings=8,
    qkv_bias=True,
    o_bias=True,
    qk_norm=True,
)


def shapes_of(model: decoder.Decoder) -> dict:
    shapes = decoder.param_shapes(model)
    return jax.tree.map(lambda s: jax.ShapeDtypeStruct(s, np.float32), shapes, is_leaf=lambda x: isinstance(x, tuple))


def test_decoder_parameters_follow_the_rules_on_a_3d_mesh():
    specs = sharding.param_specs(shapes_of(decoder.Decoder(CONFIG)), sharding.MeshShape(data=2, fsdp=2, tensor=2))
    t, f = "tensor", "fsdp"
    expected = {
        "embed": P(t, f),  # [V, D]: vocab, embed
        "norm": P(None),
        "head": P(f, t),  # [D, V]
        "layers": {
            "attention_norm": P(None, None),
            "mlp_norm": P(None, None),
            "q": P(None, f, t),  # [L, D, H*Dh]
            "k": P(None, f, t),  # [L, D, K*Dh]
            "v": P(None, f, t),
            "o": P(None, t, f),  # [L, H*Dh, D]
            "q_bias": P(None, t),
            "k_bias": P(None, t),
            "v_bias": P(None, t),
            "o_bias": P(None, None),
            "q_norm": P(None, None),
            "k_norm": P(None, None),
            "gate": P(None, f, t),  # [L, D, F]
            "up": P(None, f, t),
            "down": P(None, t, f),  # [L, F, D]
        },
    }
    assert specs == expected


def test_fsdp_only_and_a_value_head():
    """Without tensor the heads and MLP stay whole; a value head's single output is never split."""
    specs = sharding.param_specs(shapes_of(decoder.Decoder(CONFIG, out_dim=1)), sharding.MeshShape(fsdp=4))
    assert specs["embed"] == P(None, "fsdp") and specs["head"] == P("fsdp", None)
    assert specs["layers"]["q"] == P(None, "fsdp", None) and specs["layers"]["down"] == P(None, None, "fsdp")


def test_other_models_fall_back_to_fsdp_on_their_largest_divisible_dimension():
    flax_tree = {
        "params": {
            "Dense_0": {
                "kernel": jax.ShapeDtypeStruct((6, 8), np.float32),
                "bias": jax.ShapeDtypeStruct((8,), np.float32),
            },
            "Embed_0": {"embedding": jax.ShapeDtypeStruct((5, 3), np.float32)},  # nothing 2 divides: whole
            "q": jax.ShapeDtypeStruct((4, 6), np.float32),  # a decoder name at another rank: the fallback too
        }
    }
    specs = sharding.param_specs(flax_tree, sharding.MeshShape(data=2, fsdp=2))["params"]
    assert specs["Dense_0"] == {"kernel": P(None, "fsdp"), "bias": P("fsdp")}
    assert specs["Embed_0"]["embedding"] == P(None, None) and specs["q"] == P(None, "fsdp")


def test_optimizer_moments_are_split_as_their_parameters():
    params = {"actor": decoder.init_params(decoder.Decoder(CONFIG), jax.random.key(0))}
    state = create_train_state(lambda *a: None, params, LmConfig())
    mesh = sharding.MeshShape(fsdp=2, tensor=2)
    specs = sharding.param_specs(state, mesh)
    adam = specs.opt_state.inner_state[1][0]
    assert adam.mu == specs.params == adam.nu == sharding.param_specs(params, mesh)
    assert adam.count == P() and specs.opt_state.hyperparams["learning_rate"] == P()


@pytest.mark.parametrize(
    "text, message",
    [
        ("data=2,pipe=2", "'pipe=2' is not AXIS=SIZE with AXIS among data, fsdp, tensor"),
        ("fsdp", "'fsdp' is not AXIS=SIZE"),
        ("data=0", "the size of data must be a positive integer, got '0'"),
        ("data=x", "got 'x'"),
        ("data=2,data=2", "axis data is given twice"),
    ],
)
def test_malformed_meshes_are_refused(text, message):
    with pytest.raises(ConfigError, match=message):
        validate(LmConfig(mesh=text))


def test_a_mesh_of_other_than_the_devices_there_are_is_refused():
    assert jax.device_count() == 1
    with pytest.raises(ConfigError, match="needs 4 devices .* but 1 is available") as error:
        validate(LmConfig(mesh="data=2,fsdp=2"))
    assert "XLA_FLAGS=--xla_force_host_platform_device_count=N" in str(error.value) and "--distributed" in str(
        error.value
    )
    validate(LmConfig(mesh="data=1"))  # one device: a mesh of one


def test_batches_and_dimensions_the_mesh_does_not_divide_are_refused(monkeypatch):
    monkeypatch.setattr(sharding.jax, "device_count", lambda: 4)  # validation only: nothing runs
    with pytest.raises(ConfigError, match="num_prompts x group_size is 6 sequences: make it a multiple of 4"):
        validate(LmConfig(num_prompts=3, group_size=2, num_minibatches=1, mesh="data=4"))
    with pytest.raises(ConfigError, match=r"a minibatch .* is 2 sequences: make it a multiple of 4"):
        validate(LmConfig(num_prompts=4, group_size=2, num_minibatches=4, mesh="data=2,fsdp=2"))
    decoder_cfg = dict(model="decoder", model_dim=12, num_heads=2, num_prompts=4, group_size=2, num_minibatches=1)
    monkeypatch.setattr(sharding.jax, "device_count", lambda: 8)
    with pytest.raises(
        ConfigError, match=r"parameter embed .* embed dimension \(12\) over fsdp=8.*among \[1, 2, 3, 4, 6, 12\]"
    ):
        validate(LmConfig(**decoder_cfg, mesh="fsdp=8"))
    monkeypatch.setattr(sharding.jax, "device_count", lambda: 4)
    with pytest.raises(ConfigError, match=r"embed \(15, 12\) splits its vocab dimension \(15\) over tensor=2"):
        validate(LmConfig(**decoder_cfg, mesh="fsdp=2,tensor=2"))  # addition's 15 tokens
    validate(LmConfig(**decoder_cfg, mesh="data=2,fsdp=2"))
    validate(LmConfig(**{**decoder_cfg, "model": "transformer"}, mesh="fsdp=4"))  # the fallback splits what it can


def test_a_sweep_refuses_mesh():
    spec = {"task": "lm", "seeds": [0], "base": {"mesh": "data=1", "num_updates": 2}}
    with pytest.raises(SpecError, match="a sweep already shards its .setting, seed. pairs"):
        sweep.load_spec(spec)


def test_without_a_mesh_the_constraints_are_the_identity():
    x = np.ones((4, 2), np.float32)
    assert sharding.constrain_params(x) is x and sharding.constrain_batch(x) is x
    traced = sharding.on_mesh(lambda cfg, y: sharding.constrain_batch(y) is y)
    assert traced(LmConfig(), x)


FOUR_DEVICES = """
import dataclasses, json, sys
import jax, jax.numpy as jnp, numpy as np
from ppo_jax.lm import decoder, sharding
from ppo_jax.lm.config import LmConfig
from ppo_jax.lm.models import make_models
from ppo_jax.lm.task import LM
from ppo_jax.runs import make_keys
from ppo_jax.segments import compile_segments

cfg = LmConfig(**json.loads(sys.argv[1]))
shared = jax.device_get(jax.jit(LM.prepare_shared)(cfg, jax.random.key(0)))
keys, out = make_keys([0, 1]), {}
for mesh in ["", "data=2,fsdp=2"]:
    run_cfg = dataclasses.replace(cfg, mesh=mesh)
    placed = LM.place(run_cfg, shared)
    segments = compile_segments(LM, run_cfg, keys, placed, cfg.num_updates)
    carry, metrics = segments.advance(run_cfg, segments.init(run_cfg, keys, placed), 0, placed)
    q = carry.train_state.params["actor"]["layers"]["q"]
    mu = carry.train_state.opt_state.inner_state[1][0].mu["actor"]["layers"]["q"]
    reference = placed.sft["layers"]["q"]
    out[mesh] = {
        "metrics": {name: np.asarray(values).tolist() for name, values in metrics.items()},
        "q": [len(q.sharding.device_set), [list(s.data.shape) for s in q.addressable_shards]],
        "mu": [list(s.data.shape) for s in mu.addressable_shards],
        "reference": [list(s.data.shape) for s in reference.addressable_shards] if mesh else [],
    }
    if mesh:  # what the rollout's batch and the decoder's KV cache [L, B, S, K, Dh] are constrained to
        policy = make_models(run_cfg).policy
        traced = sharding.on_mesh(lambda c, w: (sharding.constrain_batch(jnp.zeros((16, 5))), decoder.empty_cache(policy, 16, 6)))
        batch, cache = jax.jit(traced, keep_unused=True)(run_cfg, placed.sft["embed"])  # on the mesh's devices
        out[mesh]["batch"], out[mesh]["cache"] = str(batch.sharding.spec), str(cache.keys.sharding.spec)
print(json.dumps(out))
"""

# The copy task from a fresh policy: rewards vary within groups from the first update, so every update moves the
# policy by a real gradient (with all rewards 0 Adam would amplify float noise into the parameters).
TINY = dict(
    problem="copy", vocab_size=4, prompt_len=2, model="decoder", model_dim=16, num_layers=1, num_heads=2,
    num_prompts=4, group_size=4, num_minibatches=2, num_updates=3, sft_steps=0, eval_prompts=8, lr=1e-2,
)  # fmt: skip


def test_a_run_on_4_devices_equals_one_device_and_its_parameters_are_split():
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=4"}
    proc = subprocess.run(
        [sys.executable, "-c", FOUR_DEVICES, json.dumps(TINY)], env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.splitlines()[-1])
    one, four = out[""], out["data=2,fsdp=2"]
    # one device: q [2 seeds, L=1, D=16, H*Dh=16] whole; on the mesh its embed dimension split over fsdp (2 ways)
    # and replicated over data: 4 shards of [2, 1, 8, 16]; Adam's moment and the reference (SFT) model likewise.
    assert one["q"] == [1, [[2, 1, 16, 16]]]
    assert four["q"] == [4, [[2, 1, 8, 16]] * 4] and four["mu"] == [[2, 1, 8, 16]] * 4
    assert four["reference"] == [[1, 8, 16]] * 4
    assert max(np.max(np.abs(one["metrics"]["accuracy"])), np.max(one["metrics"]["reward"])) > 0  # a real signal
    for name, values in one["metrics"].items():
        # measured: at most 2e-7 apart (the sharded program sums in another order); discrete ones (lengths, rewards)
        # equal, so the same tokens were sampled
        np.testing.assert_allclose(four["metrics"][name], values, rtol=1e-4, atol=1e-6, err_msg=name)
    # the rollout's batch [B, T] and the KV cache [L, B, S, K, Dh]: rows over (data, fsdp) (trailing Nones not shown)
    assert four["batch"] == "P(('data', 'fsdp'),)" and four["cache"] == "P(None, ('data', 'fsdp'))"


def _cli(*args, env=None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "ppo_jax.cli", *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )


def _flags(config: dict) -> list[str]:
    return [part for name, value in config.items() for part in (f"--{name.replace('_', '-')}", str(value))]


@MULTIHOST
def test_two_processes_with_distributed_equal_one(tmp_path):
    """``ppo-jax lm --distributed --mesh data=2,fsdp=2`` over 2 processes x 2 CPU devices (a faked SLURM step, gloo
    collectives) writes the metrics one process on one device writes."""
    flags = [*_flags(TINY), "--seeds", "2", "--preset", "grpo", "--no-progress"]
    single = _cli("lm", *flags, "--out", tmp_path / "one")
    procs = []
    for rank in range(2):
        env = faked_slurm_step(rank, 2000 + os.getpid() % 1000)
        procs.append(_cli("lm", *flags, "--mesh", "data=2,fsdp=2", "--distributed", "--out", tmp_path / "two", env=env))
    for proc in [single, *procs]:
        stdout, stderr = proc.communicate(timeout=900)
        assert proc.returncode == 0, stderr[-3000:]
    one = pd.read_csv(tmp_path / "one" / "metrics.csv")
    two = pd.read_csv(tmp_path / "two" / "metrics.csv")
    assert list(two.columns) == list(one.columns) and len(two) == len(one) == 2 * TINY["num_updates"]
    for column in one.columns:
        if one[column].dtype.kind == "f":
            np.testing.assert_allclose(two[column], one[column], rtol=1e-4, atol=1e-6, err_msg=column)
        else:
            assert (two[column] == one[column]).all(), column
    config = json.loads((tmp_path / "two" / "config.json").read_text())
    assert "data=2,fsdp=2" in json.dumps(config)
    assert json.loads((tmp_path / "two" / "metadata.json").read_text())["status"] == "complete"


@MULTIHOST
def test_an_8_seed_lm_sweep_sharded_over_4_devices_equals_the_unsharded_one(tmp_path):
    """The sweep's pairs axis over 4 devices (2 seeds each), against the same sweep in one process on one device."""
    spec = tmp_path / "tiny_lm.yaml"
    spec.write_text(json.dumps({"task": "lm", "name": "tiny_lm", "seeds": list(range(8)), "base": TINY}))
    tables = {}
    for name, devices in (("one", 1), ("four", 4)):
        env = {"XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}", "PPO_JAX_CACHE_DIR": "none"}
        proc = _cli("sweep", spec, "--out", tmp_path / name, env=env)
        stdout, stderr = proc.communicate(timeout=900)
        assert proc.returncode == 0, stderr[-3000:]
        assert f"8 pairs on {devices} device(s)" in stdout
        tables[name] = pd.read_parquet(tmp_path / name / "metrics.parquet")
    one, four = tables["one"], tables["four"]
    assert len(one) == 8 * TINY["num_updates"] and list(one.seed.unique()) == list(range(8))
    pd.testing.assert_frame_equal(one[["seed", "update"]], four[["seed", "update"]])
    for column in one.columns:
        if one[column].dtype.kind == "f":
            np.testing.assert_allclose(four[column], one[column], rtol=1e-4, atol=1e-6, err_msg=column)
