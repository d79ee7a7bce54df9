"""scripts/bench_lm.py runs end to end at tiny sizes (--quick) and writes every row with its provenance.

A smoke test, so that the script cannot rot unnoticed: no timing is asserted.
"""

import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # tests/scripts has no __init__.py: tests.helpers may not be importable


def _bench_lm(monkeypatch):
    """scripts/bench_lm.py as a module (scripts/ is not a package), registered while the test runs (dataclasses)."""
    spec = importlib.util.spec_from_file_location("bench_lm", ROOT / "scripts" / "bench_lm.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "bench_lm", module)
    spec.loader.exec_module(module)
    return module


def test_quick_run_writes_every_row_and_the_provenance(tmp_path, capsys, monkeypatch):
    out = tmp_path / "bench_lm.json"
    _bench_lm(monkeypatch).main(["--quick", "--out", str(out)])
    printed = capsys.readouterr().out
    result = json.loads(out.read_text())

    cases = {(r["kind"], r["runs"], r["use_cache"]) for r in result["results"]}
    assert cases == {
        ("generate", 1, True),
        ("generate", 1, False),
        ("generate", 2, True),
        ("generate", 2, False),
        ("train", 1, None),
        ("train", 2, None),
    }
    for row in result["results"]:
        assert len(row["all_s"]) == 1 and row["median_s"] > 0 and row["positions_per_s"] > 0
        assert 0 < row["response_tokens"] <= row["runs"] * row["positions_per_run"]
        assert {"per_run_vs_1_run", "sequential_s", "sequential_over_vmapped"} <= row.keys()
        assert (row["kind"] == "train") == ("updates_per_s_per_run" in row)
    assert {s["runs"] for s in result["cache_speedups"]} == {1, 2}

    assert result["config"]["num_updates"] == 2 and result["config"]["model"] == "transformer"
    metadata = result["metadata"]
    assert metadata["command"][:2] == ["python", "scripts/bench_lm.py"] and "--quick" in metadata["command"]
    assert {"jax", "jaxlib", "flax"} <= metadata["versions"].keys()
    assert {"git_commit", "git_dirty", "cpu_count", "cpu_model", "backend"} <= metadata.keys()
    assert "| train | 2 |" in printed and "sequential / vmapped" in printed
