"""A sweep directory survives a bad disk and a double launch: corrupt files, a full disk, two writers, a log file.

Cost on 2 CPU cores (~45 s): one program is compiled, by the first of two processes launched at once
on one directory (the tiny spec, 6 chunks of 1 pair), whose compile holds the directory while the other
is refused; its directory is the reference of every other test, and its program, in the module's
compilation cache, serves every later run (in this process and in subprocesses).
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ppo_jax.cli import main
from ppo_jax.errors import CorruptFileError
from ppo_jax.sweep.sweep_dir import check_sweep_dir
from tests.helpers import ROOT

TINY_SPEC = ROOT / "experiments" / "clip_eps_tiny.yaml"  # 3 clip_eps x seeds [0, 7], 8 updates


pytestmark = pytest.mark.usefixtures("compilation_cache")


def sweep_process(out: Path, *args: str) -> subprocess.Popen:
    command = [sys.executable, "-m", "ppo_jax.cli", "sweep", str(TINY_SPEC), "--out", str(out), "--chunk-size", "1"]
    return subprocess.Popen([*command, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.fixture(scope="module")
def launched_twice(tmp_path_factory, compilation_cache) -> tuple[Path, list[tuple]]:
    """The tiny spec launched twice at once on one directory: ``(directory, [(pid, stdout, stderr, returncode)] * 2)``."""
    out = tmp_path_factory.mktemp("sweeps") / "reference"
    procs = [sweep_process(out), sweep_process(out)]
    return out, [(proc.pid, *proc.communicate(timeout=300), proc.returncode) for proc in procs]


@pytest.fixture(scope="module")
def reference(launched_twice) -> tuple[Path, pd.DataFrame]:
    """The tiny spec, uninterrupted, in 6 chunks of 1 pair."""
    return launched_twice[0], pd.read_parquet(launched_twice[0] / "metrics.parquet")


def copy_of(reference, tmp_path: Path) -> Path:
    out = tmp_path / "sweep"
    shutil.copytree(reference[0], out)
    return out


def assert_same_table(out: Path, reference) -> None:
    pd.testing.assert_frame_equal(pd.read_parquet(out / "metrics.parquet"), reference[1], check_exact=True)


def test_a_truncated_chunk_is_moved_aside_and_run_again_on_resume(reference, tmp_path, capsys):
    out = copy_of(reference, tmp_path)
    chunk = out / "chunks" / "g000-c00001.parquet"
    truncated = chunk.read_bytes()[: chunk.stat().st_size // 2]
    chunk.write_bytes(truncated)
    assert main(["sweep", str(TINY_SPEC), "--out", str(out), "--resume"]) == 0
    stdout, stderr = capsys.readouterr()
    assert "Traceback" not in stderr
    [warning] = [line for line in stderr.splitlines() if line.startswith("warning:")]
    assert f"{chunk} is corrupt or truncated (ArrowInvalid: Parquet magic bytes not found" in warning
    assert "running the chunk again" in warning
    [moved] = (out / "corrupt").iterdir()  # kept, not deleted, and named in the warning
    assert moved.name.startswith("chunks-g000-c00001.parquet.") and str(moved) in warning
    assert moved.read_bytes() == truncated
    assert stdout.count("chunk g000-") == 1 and "chunk g000-c00001:" in stdout  # only that chunk ran
    assert_same_table(out, reference)


def test_a_corrupt_table_or_summary_is_merged_again(reference, tmp_path, capsys):
    out = copy_of(reference, tmp_path)
    summary = (out / "summary.csv").read_bytes()
    (out / "metrics.parquet").write_bytes(b"PAR1")
    (out / "summary.csv").write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(CorruptFileError, match="metrics.parquet is corrupt"):
        check_sweep_dir(out)  # what a report calls first
    assert main(["sweep", str(TINY_SPEC), "--out", str(out), "--resume"]) == 0
    stdout, stderr = capsys.readouterr()
    assert "metrics.parquet is corrupt or truncated" in stderr and "merging the table again" in stderr
    assert "chunk g000-" not in stdout  # nothing ran: the chunks were whole
    assert_same_table(out, reference)
    assert (out / "summary.csv").read_bytes() == summary
    check_sweep_dir(out)


@pytest.mark.parametrize("name", ["spec.json", "plan.json", "metadata.json"])
def test_a_corrupt_file_that_cannot_be_recomputed_is_named_and_kept(name, reference, tmp_path, capsys):
    out = copy_of(reference, tmp_path)
    text = (out / name).read_text()
    (out / name).write_text(text[: len(text) // 2])
    with pytest.raises(CorruptFileError, match=name):
        check_sweep_dir(out)
    assert main(["sweep", str(TINY_SPEC), "--out", str(out), "--resume"]) == 2
    stdout, stderr = capsys.readouterr()
    assert stderr.count("\n") == 1 and "Traceback" not in stderr  # one line
    assert stderr.startswith(f"error: {out / name} is corrupt or truncated (JSONDecodeError:")
    assert "restore it from a backup, or start over with --force" in stderr
    assert (out / name).read_text() == text[: len(text) // 2] and not (out / "corrupt").exists()


@pytest.mark.parametrize("failing", [2, 7], ids=["second chunk", "merged table"])
def test_a_full_disk_stops_the_sweep_cleanly_and_resume_finishes_it(failing, reference, tmp_path, monkeypatch, capsys):
    import pyarrow.parquet as pq

    write_table, calls = pq.write_table, []

    def full_disk(table, where, **kwargs):
        calls.append(where)
        if len(calls) == failing:  # what the disk took before it was full, then the error
            where.write(b"PAR1 half") if hasattr(where, "write") else Path(where).write_bytes(b"PAR1 half")
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return write_table(table, where, **kwargs)

    monkeypatch.setattr(pq, "write_table", full_disk)
    out = tmp_path / "sweep"
    assert main(["sweep", str(TINY_SPEC), "--out", str(out), "--chunk-size", "1"]) == 1
    stderr = capsys.readouterr().err
    [error] = [line for line in stderr.splitlines() if line.startswith("error:")]  # one line
    target = out / ("chunks/g000-c00001.parquet" if failing == 2 else "metrics.parquet")  # 6 chunks, then the table
    assert f"could not write {target}: No space left on device" in error and "continue with --resume" in error
    assert "Traceback" not in stderr
    written = sorted((out / "chunks").iterdir())  # no temporary file left; what was written reads back
    assert [p.name for p in written] == [f"g000-c0000{i}.parquet" for i in range(failing - 1)]
    assert all(len(pd.read_parquet(p)) == 8 for p in written)
    assert json.loads((out / "metadata.json").read_text())["status"] == "running"

    monkeypatch.setattr(pq, "write_table", write_table)  # space freed
    assert main(["sweep", str(TINY_SPEC), "--out", str(out), "--resume"]) == 0
    assert_same_table(out, reference)


def test_progress_in_a_log_is_plain_lines(reference, tmp_path, capsys):
    assert main(["sweep", str(TINY_SPEC), "--out", str(tmp_path / "sweep"), "--chunk-size", "1"]) == 0
    stdout, stderr = capsys.readouterr()  # neither is a terminal
    assert "\r" not in stdout + stderr
    lines = [line.split(" in ")[0] for line in stderr.splitlines() if line.startswith("chunks ")]
    assert lines == [f"chunks {i}/6 ({100 * i / 6:.0f}%)" for i in range(1, 7)]  # 10% of 6 chunks: each


def test_a_second_sweep_on_a_directory_in_use_is_refused_naming_the_first(launched_twice):
    out, results = launched_twice
    assert sorted(rc for *_, rc in results) == [0, 2], results
    [(winner, *_)] = [r for r in results if r[-1] == 0]
    [(_, stdout, stderr, _)] = [r for r in results if r[-1] == 2]
    assert stderr.count("\n") == 1 and f"is in use by pid {winner} on host {socket.gethostname()} since " in stderr
    assert f"sweep {TINY_SPEC} --out {out} --chunk-size 1)" in stderr  # its command
    assert stdout == "" and "Traceback" not in stderr  # refused before compiling anything
    assert len(pd.read_parquet(out / "metrics.parquet")) == 48
    assert len((out / "sweep.log").read_text().splitlines()) == 6  # every chunk once
    assert not (out.parent / ".reference.lock").exists()  # the lock file goes with its last holder


def test_two_parts_at_once_run_each_chunk_once(reference, tmp_path):
    out = tmp_path / "sweep"
    procs = [sweep_process(out, "--part", "0/1"), sweep_process(out, "--part", "0/1")]  # the same part, twice
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 0, stderr
    ran = [line.split(":")[0] for line in (out / "sweep.log").read_text().splitlines()]
    assert sorted(ran) == [f"chunk g000-c0000{i}" for i in range(6)]  # each chunk once
    chunks = json.loads((out / "metadata.json").read_text())["chunks"]  # who ran each (the chunk files' metadata)
    assert sorted(c["chunk"] for c in chunks) == [f"g000-c0000{i}" for i in range(6)]
    assert {c["pid"] for c in chunks} <= {proc.pid for proc in procs}
    processes = json.loads((out / "metadata.json").read_text())["processes"]  # each with the commit of its tree
    assert sorted((p["pid"], p["chunks"]) for p in processes) == sorted(
        (pid, sum(c["pid"] == pid for c in chunks)) for pid in {c["pid"] for c in chunks}
    )
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    assert {p["git_commit"] for p in processes} == {head or None}
    assert not (out / "claims").exists() and not (tmp_path / ".sweep.lock").exists()
    table, keys = pd.read_parquet(out / "metrics.parquet"), ["env", "setting_id", "seed", "update"]
    pd.testing.assert_frame_equal(table[keys], reference[1][keys])  # 1 pair per chunk: float32 rounding aside
    np.testing.assert_allclose(table["episode_return"], reference[1]["episode_return"], rtol=2e-4)
