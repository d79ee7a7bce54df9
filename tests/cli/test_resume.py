"""A run that survives: SIGTERM, SIGKILL and a corrupt checkpoint on the way, then ``--resume`` gives the uninterrupted run.

One chain of subprocesses (each compiles the same small program, ~10 s):
the uninterrupted reference; the run stopped by SIGTERM after its first
checkpoint (exit 143, the resume command printed); resumed and killed with
SIGKILL after a later checkpoint; its newest checkpoint corrupted; resumed to
the end, falling back to the checkpoint before it. The result must equal the
reference bit for bit: metrics.csv, params.msgpack, evaluation.csv. Its
TensorBoard events, written across the three processes, must hold every
update of metrics.csv exactly once.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ppo_jax.rl.task import METRIC_NAMES
from ppo_jax.storage.checkpoints import CHECKPOINT_DIR

LONG = [
    "--total-timesteps",
    "64000",
    "--num-envs",
    "2",
    "--num-steps",
    "16",
    "--num-minibatches",
    "1",
    "--update-epochs",
    "1",
    "--checkpoint-every",
    "50",
    "--seeds",
    "2",
    "--eval-episodes",
    "2",
    "--no-progress",
]
NUM_UPDATES = 2000  # 64000 // (2 * 16)


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "ppo_jax.cli", "train", *args]


def checkpoints(run: Path) -> list[int]:
    directory = run / CHECKPOINT_DIR
    return sorted(int(p.name) for p in directory.iterdir() if p.name.isdigit()) if directory.is_dir() else []


def start_and_signal(args: list[str], run: Path, sig: int, after: int) -> subprocess.CompletedProcess:
    """Start ``ppo-jax train args``; once it has a checkpoint past update ``after``, send ``sig``; wait for it."""
    proc = subprocess.Popen(command(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 240
    while not [u for u in checkpoints(run) if u > after] and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert proc.poll() is None, f"the run ended before it could be stopped: {proc.communicate()}"
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=240)
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_stopped_killed_and_corrupted_run_resumes_to_the_uninterrupted_run(tmp_path):
    pytest.importorskip("tensorboardX")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    reference, run = tmp_path / "reference", tmp_path / "run"
    done = subprocess.run(command(*LONG, "--out", str(reference)), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr

    stopped = start_and_signal([*LONG, "--out", str(run), "--log", "tensorboard"], run, signal.SIGTERM, after=0)
    assert stopped.returncode == 128 + signal.SIGTERM, stopped.stderr
    assert f"continue with: ppo-jax train --out {run} --resume" in stopped.stdout
    first_stop = max(checkpoints(run))
    assert 0 < first_stop < NUM_UPDATES and not (run / "params.msgpack").exists()

    refused = subprocess.run(command("--out", str(run), "--resume", "--lr", "0.1"), capture_output=True, text=True)
    assert refused.returncode == 2 and "--lr: the run has" in refused.stderr and "Traceback" not in refused.stderr

    resume = ["--out", str(run), "--resume", "--no-progress", "--log", "tensorboard"]
    killed = start_and_signal(resume, run, signal.SIGKILL, after=first_stop + 100)
    assert killed.returncode == -signal.SIGKILL
    newest = max(checkpoints(run))
    for path in (run / CHECKPOINT_DIR / str(newest) / "state").rglob("*"):
        if path.is_file():
            path.write_bytes(b"\x00 not a checkpoint")

    finished = subprocess.run(command(*resume), capture_output=True, text=True, timeout=300)
    assert finished.returncode == 0, finished.stderr
    assert f"checkpoints/{newest} cannot be read" in finished.stderr
    for name in ("metrics.csv", "params.msgpack", "evaluation.csv"):
        assert (run / name).read_bytes() == (reference / name).read_bytes(), name
    assert not (run / CHECKPOINT_DIR).exists()

    table = pd.read_csv(run / "metrics.csv")
    assert len(table) == 2 * NUM_UPDATES
    for seed, rows in table.groupby("seed"):
        events = EventAccumulator(str(run / "tensorboard" / f"seed_{seed}"), size_guidance={"scalars": 0})
        events.Reload()
        assert set(events.Tags()["scalars"]) == set(METRIC_NAMES)
        for name in ("episode_return", "loss", "kl"):
            scalars = events.Scalars(name)
            assert [s.step for s in scalars] == list(range(NUM_UPDATES)), name  # each update once, in order
            np.testing.assert_array_equal(
                np.float32([s.value for s in scalars]), rows.sort_values("update")[name].to_numpy(np.float32)
            )


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--resume"], "--resume continues the run in --out DIR: add --out"),
        (["--checkpoint-every", "5%"], "--checkpoint-every writes checkpoints into the run directory: add --out"),
        (["--out", "{out}", "--checkpoint-every", "0%"], "--checkpoint-every '0%': give a percentage"),
        (["--out", "{out}", "--checkpoint-every", "often"], "--checkpoint-every 'often'"),
        (["--out", "{out}", "--keep-checkpoints", "0"], "--keep-checkpoints must be >= 1"),
        (["--log", "tensorboard"], "--log tensorboard writes into the run directory: add --out DIR"),
        (["--out", "{out}", "--resume"], "holds no unfinished ppo-jax run"),
        (["--out", "{out}", "--resume", "--force"], "--resume and --force exclude each other"),
    ],
)
def test_long_run_flags_are_refused_before_compiling(args, expected, tmp_path, capsys):
    from ppo_jax.cli import main

    out = tmp_path / "run"
    assert main(["train", *[a.replace("{out}", str(out)) for a in args]]) == 2
    assert expected in capsys.readouterr().err
    assert not out.exists()


def test_checkpoint_interval_in_updates():
    from ppo_jax.segments import checkpoint_interval

    assert checkpoint_interval("5%", 976) == 49 and checkpoint_interval("100%", 10) == 10  # ceil(48.8)
    assert checkpoint_interval("0.5%", 100) == 1 and checkpoint_interval("120", 976) == 120
    assert checkpoint_interval(None, 976) is None
