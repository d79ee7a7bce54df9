"""``ppo_jax.config_fields``: every float32 leaf of every config refuses a value float32 cannot hold, as given."""

from __future__ import annotations

import warnings
from typing import NamedTuple

import numpy as np
import pytest

from ppo_jax.config_fields import refuse_inert, to_float32, traced_fields
from ppo_jax.errors import ConfigError
from ppo_jax.lm.config import LmConfig, RlhfConfig
from ppo_jax.rl.config import PPOConfig

LEAVES = [(cls, name) for cls in (PPOConfig, LmConfig, RlhfConfig) for name in traced_fields(cls)]


@pytest.mark.parametrize("cls, name", LEAVES, ids=[f"{c.__name__}.{n}" for c, n in LEAVES])
def test_every_leaf_refuses_what_float32_cannot_hold_and_keeps_what_it_can(cls, name):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "overflow encountered in cast" on the way
        with pytest.raises(ConfigError, match=rf"^{name} 1e-50 underflows float32 "):
            cls(**{name: 1e-50})
        with pytest.raises(ConfigError, match=rf"^{name} -1e\+40 overflows float32 "):
            cls(**{name: -1e40})
        with pytest.raises(ConfigError, match=rf"^{name} 1{'0' * 39} overflows float32 "):
            cls(**{name: 10**39})
        for value in (0, 0.25, 3.4e38, 1.2e-38, float("inf"), float("nan")):  # held (the checks judge inf and nan)
            held = getattr(cls(**{name: value}), name)
            assert held.dtype == np.float32 and (held == np.float32(value) or np.isnan(value))


def test_the_bounds_are_float32s_own():
    largest, smallest = float(np.finfo(np.float32).max), float(np.finfo(np.float32).tiny)
    assert to_float32("x", largest) == np.float32(largest) and to_float32("x", -smallest) == -np.float32(smallest)
    with pytest.raises(ConfigError, match=r"x 3\.5e\+38 overflows float32 \(its largest value is 3\.4028235e\+38\)"):
        to_float32("x", 3.5e38)
    with pytest.raises(ConfigError, match=r"smallest normal number 1\.1754944e-38"):
        to_float32("x", 1e-39)  # a subnormal: fewer digits, and 0 where denormals are flushed
    with pytest.raises(ConfigError, match=r"x a 1329-bit integer overflows"):
        to_float32("x", 10**400)  # beyond float64 too: no OverflowError


class Switched(NamedTuple):
    """A stand-in config: what ``refuse_inert`` reads of one is ``inert_fields()``."""

    inert: dict

    def inert_fields(self) -> dict:
        return self.inert


def test_refuse_inert_names_what_was_typed_once_per_reason():
    cfg = Switched({"beta": "no KL (kl_mode: none)", "kl_estimator": "no KL (kl_mode: none)", "ratio": "pg"})
    refuse_inert(cfg, {"lr": "--lr", "kl_mode": "--kl-mode"})  # neither is ignored: nothing raised
    with pytest.raises(ConfigError) as error:
        refuse_inert(cfg, {"beta": "--beta", "kl_estimator": "--kl-estimator", "ratio": "--ratio"})
    assert str(error.value) == (
        "--beta and --kl-estimator are ignored because no KL (kl_mode: none); --ratio is ignored because pg. "
        "Drop --beta, --kl-estimator and --ratio, or turn on the switch that uses them."
    )
    with pytest.raises(ConfigError) as error:  # one flag that sets two ignored fields (--clip-eps): named once
        refuse_inert(Switched({"low": "pg", "high": "pg"}), {"low": "--clip-eps", "high": "--clip-eps"})
    assert str(error.value) == "--clip-eps is ignored because pg. Drop --clip-eps, or turn on the switch that uses it."
