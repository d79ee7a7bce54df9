"""Groups whose pretraining is the same computation on the same inputs share one pretrained model.

A sweep's groups differ in static fields, and many of them (``kl_mode``, ``loss_agg``, ``cov_reg``, ...) are read
by RL only: two groups' ``Task.prepare_shared`` (the lm task's SFT) is then the same computation, run twice. Rather
than a list of the fields pretraining reads, which a new field could silently make wrong, the fingerprint is of the
computation itself: the jaxpr of ``prepare_shared(cfg, key)`` after dead-code elimination (its equations and
constants) and the bytes of the inputs it still reads (config leaves such as ``lr`` or ``beta`` drop out; the key and
``sft_lr`` stay). Equal fingerprints mean the same program on the same values, so the same model bit for bit on one
machine. A config leaf that only feeds dead code is kept conservatively: a missed reuse, never a wrong one.
"""

from __future__ import annotations

import hashlib

import jax
import numpy as np

from ppo_jax.task_contract import Task


def _used_inputs(jaxpr) -> list[bool]:
    """Which of the jaxpr's inputs its outputs depend on (JAX's dead-code elimination); all where it is unavailable."""
    try:
        from jax._src.interpreters import partial_eval as pe

        _, used = pe.dce_jaxpr(jaxpr, [True] * len(jaxpr.outvars))
        return list(used)
    except (ImportError, AttributeError, TypeError):  # a JAX without the private helper: reuse nothing it cannot prove
        return [True] * len(jaxpr.invars)


def shared_fingerprint(task: Task, cfg, seed: int) -> str:
    """SHA-256 of ``task.prepare_shared(cfg, jax.random.key(seed))`` as a computation: traced, never run."""
    key = jax.random.key(seed)
    closed = jax.make_jaxpr(task.engine_module().prepare_shared)(cfg, key)
    used = _used_inputs(closed.jaxpr)
    leaves = jax.tree.leaves((cfg, jax.random.key_data(key)))
    if len(leaves) != len(used):  # the inputs' layout is not the leaves': fingerprint every input
        used = [True] * len(leaves)
    digest = hashlib.sha256(str(closed.jaxpr).encode())
    for const in closed.consts:
        digest.update(np.asarray(const).tobytes())
    for reads, leaf in zip(used, leaves, strict=True):
        digest.update(np.asarray(leaf).tobytes() if reads else b"-")
    return digest.hexdigest()
