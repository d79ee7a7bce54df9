"""Ctrl-C while ``ppo-jax lm`` pretrains: the process ends within seconds, exit 130, its run directory says interrupted.

SFT is one compiled program (minutes with real models). JAX lets KeyboardInterrupt out of the wait on it, but
the program runs on in XLA's threads, and Python's exit used to wait for it (then crash). Cost on 2 CPU cores
(~15-20 s): one process compiles a tiny SFT of a million steps (~10 s) and is stopped while it runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time

import pytest

from ppo_jax.storage.locks import lock_path

ENDLESS_SFT = [  # a tiny model whose SFT (all 10^6 steps: the target accuracy is unreachable) outlasts the test
    *("--problem", "copy", "--model", "gru", "--embed-dim", "4", "--hidden-dim", "8"),
    *("--prompt-len", "2", "--vocab-size", "4", "--num-prompts", "4", "--group-size", "2"),
    *("--num-minibatches", "1", "--num-updates", "2", "--pretrain-batch", "4", "--eval-prompts", "4"),
    *("--sft-steps", "1000000", "--sft-target-accuracy", "2", "--no-progress"),
]
COMPILED = "Finished XLA compilation of jit(prepare_shared)"  # JAX_LOG_COMPILES: SFT runs from here on
EXIT_SECONDS = 10  # typically under 1 s; before the fix the process ran until SFT was done


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_ctrl_c_during_sft_ends_the_process_at_once_and_the_run_says_interrupted(tmp_path):
    out = tmp_path / "run"
    command = [sys.executable, "-m", "ppo_jax.cli", "lm", "--out", str(out), *ENDLESS_SFT]
    env = {**os.environ, "JAX_LOG_COMPILES": "1", "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True)
    reader.start()
    output, deadline = [], time.monotonic() + 120
    while not any(COMPILED in line for line in output) and proc.poll() is None and time.monotonic() < deadline:
        try:
            output.append(lines.get(timeout=0.1))
        except queue.Empty:
            pass
    assert proc.poll() is None, "".join(output)
    assert json.loads((out / "metadata.json").read_text())["status"] == "running"  # written before pretraining
    time.sleep(0.5)  # SFT runs (without the log line, e.g. another JAX's wording: pretraining anyway)

    proc.send_signal(signal.SIGINT)
    sent = time.monotonic()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=60)
    seconds = time.monotonic() - sent
    proc.kill()  # if it is still there
    proc.wait()
    reader.join(timeout=10)
    while not lines.empty():
        output.append(lines.get())
    text = "".join(output)
    assert seconds < EXIT_SECONDS, f"{seconds:.1f} s from SIGINT to exit\n{text}"
    assert proc.returncode == 128 + signal.SIGINT, text
    assert f"stopped by SIGINT while pretraining, before the first update; {out} says interrupted" in text
    assert f"continue with: ppo-jax lm --out {out} --resume" in text
    assert "Traceback" not in text and "Fatal Python error" not in text
    assert json.loads((out / "metadata.json").read_text())["status"] == "interrupted"
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "metadata.json"]  # nothing else, nothing half
    assert not lock_path(out).exists()  # released before the process left
