"""scripts/gpu_suite.py runs every step at tiny sizes on the CPU (--tiny) and resumes: against skipped without a peer,
with the reason; brax and table1 ok, their files in OUT; the summary with its provenance; a rerun skips what is done.

A smoke test of the plumbing (about 75 s on 2 cores, nearly all of it two Brax compiles): no timing is asserted.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu_suite.py"


def _run(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PPO_JAX_CACHE_DIR": "none"}  # no compilation cache written outside tmp_path
    return subprocess.run([sys.executable, str(SCRIPT), *args], env=env, capture_output=True, text=True)


def _suite(out: Path) -> dict:
    result = _run("--tiny", "--out", str(out))
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads((out / "summary.json").read_text())


def test_tiny_run_writes_every_step_and_a_rerun_skips_them(tmp_path):
    out = tmp_path / "gpu"
    steps = _suite(out)["steps"]
    assert steps["against"]["status"] == "skipped" and "no --peer-path" in steps["against"]["reason"]
    assert steps["brax"]["status"] == "ok" and steps["table1"]["status"] == "ok"
    for step in steps.values():
        assert all((out / file).exists() for file in step["files"]) and step["seconds"] >= 0

    brax = json.loads((out / "brax_4envs.json").read_text())
    assert [(r["task"], r["mode"], r["num_envs"]) for r in brax["results"]] == [("inverted_pendulum", "ppo", 4)]
    assert all(r["env_steps_per_s"] > 0 for r in brax["results"]) and brax["metadata"]["backend"] == "cpu"
    assert {"brax_4envs.json", "brax.log"} <= set(steps["brax"]["files"])

    table1 = json.loads((out / "table1.json").read_text())
    assert table1["complete"] and table1["chunks_done"] == table1["chunks_total"] >= 1
    assert all(c["env"] == "brax/inverted_pendulum" and c["env_steps_per_s"] > 0 for c in table1["chunks"])
    assert (out / table1["report"]).is_file() and (out / table1["paper_table1"]).is_file()
    assert "ppo_jax.cli sweep" in (out / "table1.log").read_text()

    summary = json.loads((out / "summary.json").read_text())
    metadata = summary["metadata"]
    assert metadata["command"][:3] == ["python", "scripts/gpu_suite.py", "--tiny"] and metadata["backend"] == "cpu"
    assert {"git_commit", "git_dirty", "versions", "devices", "start_time"} <= metadata.keys()
    assert summary["tiny"] and summary["budget_s"] == 480
    markdown = (out / "summary.md").read_text()
    assert "| against | skipped |" in markdown and "| brax | ok |" in markdown and "| table1 | ok |" in markdown
    assert "| inverted_pendulum | spring | 4 | ppo |" in markdown and "PPO paper, Table 1" in markdown

    again = _suite(out)["steps"]
    assert again["against"]["status"] == "skipped" and "no --peer-path" in again["against"]["reason"]
    for name in ("brax", "table1"):
        assert again[name]["status"] == "skipped" and "done in an earlier run" in again[name]["reason"]
        assert again[name]["files"] == steps[name]["files"]


def test_bad_input_is_refused_with_a_message(tmp_path):
    for args in (["--budget-s", "0"], ["--peer-path", str(tmp_path / "no_such_checkout")]):
        result = _run("--tiny", "--out", str(tmp_path / "out"), *args)
        assert result.returncode == 2 and "error:" in result.stderr and "Traceback" not in result.stderr
