"""Advantage estimators of control PPO: ``ADVANTAGES``, the table of ``cfg.advantage``.

Every estimator has one signature, ``fn(rewards, values, next_values, terminations, dones, cfg) ->
(advantages, value targets)``, all ``[T, B]`` time-major (``ppo_jax.gae.compute_gae``'s arguments): ``next_values``
is V(s_{t+1}), or V(final observation) where the episode ended at step t; ``cfg`` supplies the float leaves
the entry ``reads`` (traced) and anything static.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from ppo_jax.gae import compute_gae
from ppo_jax.registry import Registry


class Estimator(NamedTuple):
    fn: Callable
    """``fn(rewards, values, next_values, terminations, dones, cfg) -> (advantages, targets)``, ``[T, B]`` each."""
    doc: str
    reference: str = ""
    reads: tuple[str, ...] = ()
    """The config fields it reads (the other estimators' fields are inert under it)."""


def _gae(rewards, values, next_values, terminations, dones, cfg):
    return compute_gae(rewards, values, next_values, terminations, dones, gamma=cfg.gamma, gae_lambda=cfg.gae_lambda)


ADVANTAGES: Registry[Estimator] = Registry("advantage", "advantage estimator")
ADVANTAGES.register(
    "gae",
    Estimator(
        _gae,
        "GAE(gamma, lambda); a truncated episode bootstrapped from V(final observation)",
        "Schulman et al. 2016, eq. 16; Pardo et al. 2018",
        ("gae_lambda",),
    ),
)
