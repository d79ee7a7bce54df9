"""Issue 23: a spec that would train one run under two labels is refused with a reason, never an empty one.

Repeated axis values (written the same, or written differently and held the same: 0.1 and 0.10000000001 are
one float32, 64 and [64] one width list, 0.0 and -0.0 one coefficient), repeated zip rows and repeated
random draws are refused where they are written (file, line, key path); settings that differ only in fields
their switches ignore are refused naming each such field and why.
"""

from __future__ import annotations

import re

import pytest

from ppo_jax.errors import SpecError
from ppo_jax.rl.task import PPO
from ppo_jax.sweep.spec import Setting, _check_distinct, from_dict, load_spec
from ppo_jax.sweep.spec_axes import SpecContext

BASE = "base: {total_timesteps: 1024, num_envs: 2, num_steps: 64, num_minibatches: 2, update_epochs: 1}\n"

REPEATS = [
    # (axes YAML, what the message must say)
    ("grid:\n  clip_eps: [0.1, 0.1]\n", ["line 3", "grid.clip_eps[1]", "lists 0.1 twice ([0] and [1])", "Drop one"]),
    (
        "grid:\n  clip_eps:\n    - 0.1\n    - 0.10000000001\n",
        ["line 5", "grid.clip_eps[1]", "[0] 0.1 and [1] 0.10000000001 are both 0.1 as float32"],
    ),
    ("grid:\n  hidden_sizes: [64, [64]]\n", ["grid.hidden_sizes[1]", "[0] 64 and [1] [64] are both 64"]),
    ("grid:\n  ent_coef: [0.0, -0.0]\n", ["grid.ent_coef[1]", "are both 0.0 as float32"]),
    (
        "grid:\n  clip_eps: [0.1, 0.2]\nzip:\n  lr: [1e-3, 0.001]\n  ent_coef: [0.0, 0.0]\n",
        ["line 5", "(zip.lr[1])", "zip rows 0 and 1 are the same (lr=0.001, ent_coef=0.0)"],
    ),
    (
        "random:\n  num_samples: 4\n  axes:\n    num_minibatches: {choice: [1, 2]}\n",
        ["line 3", "(random)", "random samples 0 and 2 are the same (num_minibatches=2)", "lower num_samples"],
    ),
    (
        "random:\n  num_samples: 2\n  axes:\n    lr: {uniform: [1e-3, 1.00000001e-3]}\n",
        ["line 5", "random.axes.lr.uniform", "are [0.001, 0.001] as float32"],
    ),
    (
        "grid:\n  kl_beta: [0.1, 1.0]\n",
        [
            "line 3",
            "(grid.kl_beta)",
            "kl_beta is ignored because the policy objective clip does not read it (objective: clip; kl_fixed or kl_adaptive do)",
        ],
    ),
    (
        "zip:\n  clip_eps: [0.2, 0.2]\n  kl_beta: [0.1, 1.0]\n  target_kl: [0.01, 0.02]\n",
        [
            "(zip.kl_beta)",
            "kl_beta is ignored because the policy objective clip does not read it (objective: clip; kl_fixed or kl_adaptive do)",
            "target_kl is ignored because early stopping is off",
        ],
    ),
]


@pytest.mark.parametrize("axes, expected", REPEATS, ids=[f"repeat{i}" for i in range(len(REPEATS))])
def test_one_run_under_two_labels_is_refused_with_the_reason(axes, expected, tmp_path):
    path = tmp_path / "repeat.yaml"
    path.write_text(BASE + axes)
    with pytest.raises(SpecError) as error:
        load_spec(path)
    message = str(error.value)
    assert message.startswith(f"{path}, line ") and "\n" not in message, message
    assert not re.search(r"labels: \.", message), message  # the empty reason of issue 23
    for part in expected:
        assert part in message, message


def test_settings_that_differ_in_a_used_field_are_not_repeats():
    spec = from_dict(
        {
            "grid": {"clip_eps": [0.1, 0.2]},
            "zip": {"lr": [1e-3, 3e-4], "ent_coef": [0.0, 0.0]},
            "random": {"num_samples": 3, "axes": {"vf_coef": {"uniform": [0.25, 1.0]}}},
        }
    )
    assert spec.num_combos == 2 * 2 * 3


def test_identical_settings_are_named_identical():
    """The last line of defence (every repeat above is refused earlier, where it is written) still gives a reason."""
    ctx = SpecContext("<spec>", {}, PPO)
    cfg = PPO.validate(PPO.config_class())
    settings = [Setting(0, "CartPole-v1", {"clip_eps": 0.2}, cfg), Setting(1, "CartPole-v1", {"clip_eps": 0.2}, cfg)]
    with pytest.raises(SpecError, match="their swept values are identical") as error:
        _check_distinct(settings, PPO, ctx, ("grid",))
    assert "settings 0 (clip_eps=0.2) and 1 (clip_eps=0.2) on CartPole-v1" in str(error.value)
