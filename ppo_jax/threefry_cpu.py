"""Threefry-2x32 lowered without a loop on the CPU: the same random bits, a faster and quicker-to-compile program.

JAX lowers its PRNG hash (Threefry-2x32, Salmon et al. 2011, "Parallel Random
Numbers: As Easy as 1, 2, 3", 20 rounds) on the CPU as a 5-trip ``while`` loop
to keep programs small; on GPU and TPU it uses the straight-line form. A PPO run
calls the hash several times per env step (action sampling, env keys, gymnax's
auto-reset), so on the CPU it runs thousands of tiny loops per update, each
copying its state every trip. ``install()`` registers the straight-line form for
the CPU too. It computes the same function, so every random number, and every
result of a run, is bit for bit what it was (tests/test_threefry_cpu.py checks
the published test vectors and a run against one under JAX's own lowering).
What it saves is measured in docs/benchmarks/index.md.

``PPO_JAX_THREEFRY=jax`` in the environment keeps JAX's lowering.
"""

from __future__ import annotations

import os

import numpy as np

ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
"""Rotation constants of Threefry-2x32, alternating every 4 rounds."""
KEY_PARITY = 0x1BD11BDA
"""Threefish's key-schedule parity constant."""

_installed = False


def threefry2x32(key1, key2, x1, x2):
    """The Threefry-2x32 hash of counters ``(x1, x2)`` under key ``(key1, key2)``; uint32 arrays, broadcast.

    Works on NumPy arrays (the test reference) and on jnp arrays (the lowering).
    """
    ks = (key1, key2, key1 ^ key2 ^ np.uint32(KEY_PARITY))
    x1, x2 = x1 + ks[0], x2 + ks[1]
    for group in range(5):  # 5 groups of 4 rounds, a key injection after each
        for rotation in ROTATIONS[group % 2]:
            x1 = x1 + x2
            x2 = ((x2 << np.uint32(rotation)) | (x2 >> np.uint32(32 - rotation))) ^ x1
        x1 = x1 + ks[(group + 1) % 3]
        x2 = x2 + ks[(group + 2) % 3] + np.uint32(group + 1)
    return x1, x2


def install() -> None:
    """Lower ``threefry2x32`` on the CPU as straight-line code, from now on in this process (idempotent)."""
    global _installed
    if _installed or os.environ.get("PPO_JAX_THREEFRY", "").lower() == "jax":
        return
    from jax.extend.random import threefry2x32_p
    from jax.interpreters import mlir

    def lowered(*args):
        return list(threefry2x32(*args))

    mlir.register_lowering(threefry2x32_p, mlir.lower_fun(lowered, multiple_results=True), platform="cpu")
    _installed = True
