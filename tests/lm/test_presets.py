"""Every preset gives a config that validates, with the published numbers of its source (worked out from the papers
cited in ppo_jax/lm/presets.py, written here by hand)."""

from __future__ import annotations

import numpy as np
import pytest

from ppo_jax.lm.config import LmConfig
from ppo_jax.lm.presets import CHOICES, NONE, apply_preset
from ppo_jax.lm.validation import validate

PUBLISHED = {  # preset -> fields its source fixes
    "ppo_rlhf": dict(advantage="gae", update_epochs=4, clip_eps_low=0.2, vf_coef=0.1, kl_mode="reward", beta=0.02),
    "grpo": dict(advantage="grpo", loss_agg="seq-mean-token-mean", kl_mode="loss", kl_estimator="k3", beta=0.04),
    "drgrpo": dict(advantage="drgrpo", loss_agg="seq-mean-token-sum-norm", kl_mode="none"),
    "dapo": dict(clip_eps_low=0.2, clip_eps_high=0.28, loss_agg="token-mean", kl_mode="none", dynamic_sampling=True),
    "gspo": dict(ratio="sequence", clip_eps_low=3e-4, clip_eps_high=4e-4),
    "cispo": dict(policy_loss="cispo", clip_eps_low=1.0, clip_eps_high=0.28),  # no lower bound on the IS weight
    "rloo": dict(advantage="rloo", policy_loss="pg", loss_agg="seq-mean-token-sum", kl_mode="reward"),
    "reinforce_pp": dict(advantage="reinforce_pp", kl_mode="reward", kl_estimator="k1", beta=0.01),
    "reinforce_pp_baseline": dict(advantage="reinforce_pp_baseline", kl_mode="loss", kl_estimator="k2", beta=0.01),
}


@pytest.mark.parametrize("name", [c for c in CHOICES if c != NONE])
def test_every_preset_validates_with_its_published_numbers(name):
    cfg = validate(apply_preset(name, LmConfig()))
    for field, value in PUBLISHED[name].items():
        got = getattr(cfg, field)
        assert np.isclose(got, value) if isinstance(value, float) else got == value, (field, got, value)
