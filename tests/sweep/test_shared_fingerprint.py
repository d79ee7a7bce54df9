"""Groups whose pretraining is the same computation share one SFT model: the fingerprint tells RL-only fields from
what pretraining reads, and a sweep that reuses a model gives the runs of one that pretrains it again, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from ppo_jax import sweep
from ppo_jax.lm.task import LM
from ppo_jax.sweep.shared_fingerprint import shared_fingerprint
from tests.test_task_contract import TINY

pytestmark = pytest.mark.usefixtures("compilation_cache")
CFG = LM.validate(LM.config_class(**TINY["lm"]))


def test_fields_rl_alone_reads_keep_the_fingerprint_and_what_pretraining_reads_changes_it():
    base = shared_fingerprint(LM, CFG, 0)
    # read by RL only: a static branch, a traced loss coefficient, the RL learning rate
    for change in ({"kl_mode": "none"}, {"loss_agg": "token-mean"}, {"beta": np.float32(0.5)}, {"lr": np.float32(0.1)}):
        assert shared_fingerprint(LM, CFG.replace(**change), 0) == base, change
    # read by SFT: its learning rate and token noise (traced), the task's shape (static), the pretraining key
    for change in ({"sft_lr": np.float32(0.01)}, {"demo_noise": np.float32(0.3)}, {"digits": 2}):
        assert shared_fingerprint(LM, CFG.replace(**change), 0) != base, change
    assert shared_fingerprint(LM, CFG, 1) != base


def test_a_sweep_pretrains_once_for_two_programs_whose_pretraining_is_one(tmp_path, monkeypatch, capsys):
    from ppo_jax.sweep import execute

    calls = []
    pretrain = execute.prepare_shared_once
    monkeypatch.setattr(execute, "prepare_shared_once", lambda *args: calls.append(args) or pretrain(*args))
    spec = {"task": "lm", "base": TINY["lm"], "seeds": [3], "zip": {"kl_mode": ["none", "loss"]}}
    table = sweep.run(spec, tmp_path / "sweep", chunk_size=1)  # two programs (kl_mode is static), one SFT model
    assert len(calls) == 1 and sorted(table.setting_id.unique()) == [0, 1]
    assert "group 1: the shared pretraining (seed 0) of group 0, reused" in capsys.readouterr().out
