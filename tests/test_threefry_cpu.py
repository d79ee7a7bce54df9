"""The straight-line Threefry lowering (``ppo_jax.threefry_cpu``): the same hash as JAX's, so the same runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.extend.random import threefry_2x32

import ppo_jax.rl.train  # noqa: F401 - installs the lowering
from ppo_jax import PPOConfig, threefry_cpu
from ppo_jax.rl.train import train

# Known answers of Threefry-2x32 (20 rounds) from the reference implementation's tests (Random123, kat_vectors):
# (key, counter) -> hash.
KNOWN_ANSWERS = [
    ((0x00000000, 0x00000000), (0x00000000, 0x00000000), (0x6B200159, 0x99BA4EFE)),
    ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x1CB996FC, 0xBB002BE7)),
    ((0x13198A2E, 0x03707344), (0x243F6A88, 0x85A308D3), (0xC4923A9C, 0x483DF7A0)),
]


@pytest.mark.parametrize("key, counter, expected", KNOWN_ANSWERS)
def test_known_answers_in_numpy_and_in_a_compiled_program(key, counter, expected):
    u32 = np.uint32
    numpy_hash = threefry_cpu.threefry2x32(u32([key[0]]), u32([key[1]]), u32([counter[0]]), u32([counter[1]]))
    assert [int(h[0]) for h in numpy_hash] == list(expected)
    compiled = jax.jit(threefry_2x32)(jnp.array(key, jnp.uint32), jnp.array(counter, jnp.uint32))
    assert [int(h) for h in np.asarray(compiled)] == list(expected)


def test_compiled_hash_equals_the_numpy_reference_on_random_inputs_under_vmap():
    rng = np.random.default_rng(0)
    keys = rng.integers(0, 2**32, size=(64, 2), dtype=np.uint64).astype(np.uint32)
    counts = rng.integers(0, 2**32, size=(64, 10), dtype=np.uint64).astype(np.uint32)  # even length: split in halves
    got = np.asarray(jax.jit(jax.vmap(threefry_2x32))(jnp.asarray(keys), jnp.asarray(counts)))
    h1, h2 = threefry_cpu.threefry2x32(keys[:, :1], keys[:, 1:], counts[:, :5], counts[:, 5:])
    np.testing.assert_array_equal(got, np.concatenate([h1, h2], axis=1))


def test_the_cpu_program_has_no_loop_for_random_numbers():
    if jax.default_backend() != "cpu" or os.environ.get("PPO_JAX_THREEFRY", "").lower() == "jax":
        pytest.skip("the lowering is replaced on the CPU only, unless PPO_JAX_THREEFRY=jax")
    hlo = jax.jit(lambda key: jax.random.uniform(key, (16,))).lower(jax.random.key(0)).compile().as_text()
    assert " while(" not in hlo


RUN = """
import json, sys, jax, numpy as np
from ppo_jax import PPOConfig
from ppo_jax.rl.train import train
out = jax.jit(train)(PPOConfig(env="CartPole-v1", total_timesteps=2048, num_steps=64), jax.random.key(3))
hlo = jax.jit(lambda key: jax.random.uniform(key, (16,))).lower(jax.random.key(0)).compile().as_text()
print(json.dumps({name: np.asarray(value).tolist() for name, value in out.metrics.items()} |
                 {"params": [np.asarray(x).tolist() for x in jax.tree.leaves(out.train_state.params)],
                  "jax_lowering": " while(" in hlo}))
"""


def test_a_run_is_bit_identical_to_one_under_jaxs_own_lowering():
    cfg = PPOConfig(env="CartPole-v1", total_timesteps=2048, num_steps=64)
    out = jax.jit(train)(cfg, jax.random.key(3))
    env = {**os.environ, "PPO_JAX_THREEFRY": "jax"}
    result = subprocess.run([sys.executable, "-c", RUN], env=env, capture_output=True, text=True, check=True)
    reference = json.loads(result.stdout.strip().splitlines()[-1])
    assert reference.pop("jax_lowering") or jax.default_backend() != "cpu"  # the reference really is JAX's loop
    for name, value in out.metrics.items():
        np.testing.assert_array_equal(
            np.asarray(value), np.asarray(reference[name], np.asarray(value).dtype), err_msg=name
        )
    for mine, theirs in zip(jax.tree.leaves(out.train_state.params), reference["params"], strict=True):
        np.testing.assert_array_equal(np.asarray(mine), np.asarray(theirs, np.float32))
