"""A report section registered from outside the package (no file of ppo_jax/ edited) is written and listed.

The toy section, "spread": per env x setting the range of the final return over seeds (max - min), read from
what an earlier section found (``ctx.found["finals"]``), as ``spread.csv`` and a Markdown table ``spread.md``.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from ppo_jax.report import make_report
from ppo_jax.report.build import SECTIONS, register_section, unregister_section
from ppo_jax.report.sections import Context, Files, Section
from tests.report.test_build import write_lm_sweep

TITLE = "Spread of the final return over seeds (max - min)"


def spread(ctx: Context) -> Files:
    """spread.csv and spread.md: one row per env x setting."""
    finals = ctx.found["finals"]
    table = finals.groupby(["env", "setting"], sort=False)["final_return"].agg(lambda x: x.max() - x.min())
    table = table.rename("spread").reset_index()
    table.to_csv(ctx.out / "spread.csv", index=False)
    rows = [f"| {r.env} | {r.setting} | {r.spread:.4g} |" for r in table.itertuples()]
    (ctx.out / "spread.md").write_text("\n".join(["| env | setting | spread |", "|---|---|---:|", *rows]) + "\n")
    ctx.found["spread"] = table
    return Files(data=["spread.csv"], tables=["spread.md"])


@pytest.fixture
def registered():
    section = register_section(Section("spread", spread, titles={"spread.md": TITLE}), after="per_env")
    yield section
    unregister_section("spread")


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    path = tmp_path_factory.mktemp("sections") / "rlhf"
    finals = write_lm_sweep(path, {"beta": [0.0, 0.1]})
    return path, finals


def test_a_registered_section_is_written_and_listed(registered, sweep, tmp_path):
    path, finals = sweep
    names = [s.name for s in SECTIONS]
    assert names.index("spread") == names.index("per_env") + 1
    out = make_report([path], tmp_path / "report", reps=100)
    table = pd.read_csv(out / "spread.csv")
    for row in table.itertuples():  # setting_id = [0.0, 0.1].index(beta); the score is the final true_score
        setting_id = 0 if row.setting == "beta=0" else 1
        by_seed = [finals[(setting_id, seed)][2] for seed in (0, 1)]
        assert row.spread == pytest.approx(max(by_seed) - min(by_seed), rel=1e-5)
    index = (out / "index.md").read_text()
    assert f"## {TITLE}" in index and "- [spread.csv](spread.csv)" in index
    assert index.index("## Final return per env") < index.index(f"## {TITLE}") < index.index("## Normalized score")
    assert index.index("- [per_env.csv]") < index.index("- [spread.csv]") < index.index("- [aggregates.csv]")
    assert "Sources: " in (out / "spread.md").read_text()  # stamped with the sources line, as every table
    assert TITLE in (out / "index.html").read_text() and 'href="spread.csv"' in (out / "index.html").read_text()
    assert json.loads((out / "report.json").read_text())["task"] == "rlhf"


def test_a_section_that_does_not_apply_writes_nothing(sweep, tmp_path):
    section = Section("never", spread, applies=lambda ctx: False, titles={"spread.md": TITLE})
    register_section(section)
    try:
        out = make_report([sweep[0]], tmp_path / "report", reps=100)
    finally:
        unregister_section("never")
    assert not (out / "spread.csv").exists() and TITLE not in (out / "index.md").read_text()


def test_registration_refuses_a_taken_name_or_an_unknown_place_and_unregistering_restores_the_list():
    before = list(SECTIONS)
    with pytest.raises(ValueError, match="registered already"):
        register_section(Section("per_env", spread))
    with pytest.raises(ValueError, match="no report section 'nope'"):
        register_section(Section("spread", spread), after="nope")
    assert SECTIONS == before and len({s.name for s in SECTIONS}) == len(SECTIONS)
    register_section(Section("spread", spread))
    assert SECTIONS[-1].name == "spread"
    unregister_section("spread")
    assert SECTIONS == before
