"""scripts/rl_vs_sft_pass_at_k.py: each RL run's pass@k minus its own SFT model's, paired by pretraining seed, from a
sweep's table and saved SFT curves (hand-worked values; the pretraining path is the sweep's own, tested there)."""

import importlib.util
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("rl_vs_sft", ROOT / "scripts" / "rl_vs_sft_pass_at_k.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fake_sweep(directory: Path) -> Path:
    """2 settings x SFT models {0, 1} x RL seeds {0, 1}; the final evaluation on the last of 2 logged updates."""
    directory.mkdir()
    (directory / "spec.yaml").write_text(
        "name: fake\ntask: lm\nbase: {digits: 1}\nseeds: 2\npretrain: {seeds: [0, 1]}\ngrid: {clip_eps_high: [0.1, 0.3]}\n"
    )
    rows = []
    for setting in (0, 1):
        for pretrain_seed in (0, 1):
            for seed in (0, 1):
                for update in (0, 1):
                    final = update == 1
                    p1 = 0.5 + 0.1 * setting + 0.05 * pretrain_seed + 0.01 * seed
                    rows.append(
                        dict(setting_id=setting, pretrain_seed=pretrain_seed, seed=seed, update=update,
                             eval_pass_at_1=p1 if final else np.nan, eval_pass_at_2=min(1, 2 * p1) if final else np.nan)
                    )  # fmt: skip
    pd.DataFrame(rows).to_parquet(directory / "metrics.parquet")
    return directory


def test_the_difference_is_paired_by_sft_model_and_saved_curves_are_read_back(script, tmp_path):
    sweep = fake_sweep(tmp_path / "sweep")
    curves = {"0": {"1": 0.4, "2": 0.7}, "1": {"1": 0.6, "2": 0.9}}
    saved = tmp_path / "sft.json"
    saved.write_text(json.dumps({"sweep": str(sweep.resolve()), "sft_curves": curves}))
    assert script.main([str(sweep), "--out", str(tmp_path / "out"), "--sft-curves", str(saved)]) == 0
    table = pd.read_csv(tmp_path / "out" / "pass_at_k_vs_sft.csv")
    first = table[(table.setting == "clip_eps_high=0.1") & (table.k == 1)].iloc[0]
    # RL pass@1 of SFT model 0: 0.50, 0.51 (minus 0.4); of model 1: 0.55, 0.56 (minus 0.6): mean (0.21 - 0.09) / 4
    assert first.rl_minus_sft == pytest.approx((0.10 + 0.11 - 0.05 - 0.04) / 4)
    assert first.sft == pytest.approx(0.5) and first.rl == pytest.approx(0.53) and first.runs == 4
    assert first.low < first.rl_minus_sft < first.high
    # pass@2 = 2 x pass@1 capped at 1, minus 0.7 (SFT model 0) or 0.9 (model 1)
    second = table[(table.setting == "clip_eps_high=0.3") & (table.k == 2)].iloc[0]
    assert second.rl_minus_sft == pytest.approx((1.0 - 0.7 + 1.0 - 0.7 + 1.0 - 0.9 + 1.0 - 0.9) / 4)
    assert (tmp_path / "out" / "pass_at_k_vs_sft.png").stat().st_size > 0


def test_curves_of_another_sweep_are_refused(script, tmp_path, capsys):
    sweep = fake_sweep(tmp_path / "sweep")
    saved = tmp_path / "sft.json"
    saved.write_text(json.dumps({"sweep": "/elsewhere", "sft_curves": {"0": {"1": 0.4}, "1": {"1": 0.6}}}))
    assert script.main([str(sweep), "--out", str(tmp_path / "out"), "--sft-curves", str(saved)]) == 2
    assert "leave out --sft-curves" in capsys.readouterr().err
