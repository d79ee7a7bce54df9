"""Sweeps over pretraining seeds (``pretrain: {seeds: [...]}``): one pretrained (SFT) model per seed, each running
every setting x RL seed; the table's ``pretrain_seed`` column; a run equals the same run of a sweep of that one
pretraining seed, bit for bit; an interrupted sweep resumes; the spec's errors."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from ppo_jax import sweep
from ppo_jax.errors import SpecError
from ppo_jax.sweep import sweep_dir
from ppo_jax.sweep.plan import group_pairs
from ppo_jax.sweep.spec import from_dict
from tests.helpers import interrupt_after_first_chunk
from tests.test_task_contract import TINY

pytestmark = pytest.mark.usefixtures("compilation_cache")
SPEC = {"task": "lm", "base": TINY["lm"], "seeds": [3, 4], "pretrain": {"seeds": [0, 1]}}


def test_spec_takes_a_list_of_pretraining_seeds_and_one_is_seed():
    spec = from_dict(SPEC)
    assert spec.pretrain_seeds == (0, 1) and spec.num_runs == 4
    assert spec.canonical["pretrain"] == {"seeds": [0, 1], "per_setting": False}
    groups = group_pairs(spec)
    assert [(g.pretrain_seed, g.program) for g in groups] == [(0, 0), (1, 0)]  # one program, two models
    one = from_dict({**SPEC, "pretrain": {"seeds": [2]}})
    assert one.canonical == from_dict({**SPEC, "pretrain": {"seed": 2}}).canonical  # the same sweep (--resume)
    per_setting = group_pairs(from_dict({**SPEC, "pretrain": {"seeds": [0, 1], "per_setting": True}}))
    assert [(g.pretrain_seed, g.program) for g in per_setting] == [(0, 0), (1, 1)]  # the seed is in the program


@pytest.mark.parametrize(
    "pretrain, words",
    [
        ({"seed": 0, "seeds": [1, 2]}, ["pretrain.seeds", "not both"]),
        ({"seeds": []}, ["non-empty list of integers"]),
        ({"seeds": 3}, ["non-empty list of integers"]),
        ({"seeds": [0, 0]}, ["distinct"]),
        ({"seeds": [0, -1]}, ["seeds must be integers in [0,"]),
        ({"seeds": [0, True]}, ["non-empty list of integers"]),
    ],
)
def test_spec_errors_are_clear(pretrain, words):
    with pytest.raises(SpecError) as error:
        from_dict({**SPEC, "pretrain": pretrain})
    for word in words:
        assert word in str(error.value), str(error.value)


def test_each_pretraining_seed_runs_every_seed_resumes_and_equals_its_own_sweep(tmp_path, monkeypatch):
    out = tmp_path / "sweep"
    write_chunk = sweep_dir.write_chunk
    interrupt_after_first_chunk(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        sweep.run(SPEC, out, chunk_size=2, progress=False)
    assert sweep_dir.done_chunks(out) == {"g000-c00000"}
    monkeypatch.setattr(sweep_dir, "write_chunk", write_chunk)
    table = sweep.run(SPEC, out, resume=True, chunk_size=2, progress=False)
    pd.testing.assert_frame_equal(table, pd.read_parquet(out / sweep_dir.TABLE_FILE), check_exact=True)
    assert list(table.columns[:4]) == ["env", "setting_id", "pretrain_seed", "seed"]
    runs = table.groupby(["pretrain_seed", "seed"], sort=False).size()
    assert list(runs.index) == [(0, 3), (0, 4), (1, 3), (1, 4)] and len(set(runs)) == 1

    spec = from_dict(SPEC)
    pretrained = json.loads((out / sweep_dir.METADATA_FILE).read_text())["pretrained"]
    assert sorted(pretrained) == ["0", "1"]  # each SFT model described once, by the chunk that pretrained it
    assert [pretrained[str(p)]["pretrain_seed"] for p in (0, 1)] == [0, 1]
    described = [{k: v for k, v in pretrained[str(p)].items() if k != "pretrain_seed"} for p in (0, 1)]
    assert described[0].keys() == described[1].keys() and described[0] != described[1]  # two SFT models
    by_model = [table[table.pretrain_seed == p].drop(columns="pretrain_seed").reset_index(drop=True) for p in (0, 1)]
    assert not by_model[0].equals(by_model[1])  # and their runs differ

    # the runs of pretraining seed 1 (the second group: its model not the first one drawn) are those of the sweep
    # of that one seed, bit for bit
    alone = sweep.run({**SPEC, "pretrain": {"seed": 1}}, chunk_size=2, progress=False)
    assert (alone["pretrain_seed"] == 1).all()
    pd.testing.assert_frame_equal(table[table.pretrain_seed == 1].reset_index(drop=True), alone, check_exact=True)

    summary = pd.read_csv(out / sweep_dir.SUMMARY_FILE)
    assert list(summary[["pretrain_seeds", "seeds"]].iloc[0]) == [2, 2]
    text = sweep.format_summary(summary, spec.task)
    assert "hierarchical bootstrap over 2 SFT models x 2 RL seeds" in text
