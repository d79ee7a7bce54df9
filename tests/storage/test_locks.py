"""One writer per output directory: a second one is refused naming the first; parts share; a killed holder frees it.

Nothing compiles here: ``ppo-jax train`` is refused before it compiles.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys

import pytest

from ppo_jax.cli import main
from ppo_jax.errors import DirectoryInUse
from ppo_jax.storage.locks import DirectoryLock, is_alive, process_record


def test_a_second_writer_is_refused_naming_the_first(tmp_path):
    out = tmp_path / "run"
    with DirectoryLock(out):
        for shared in (False, True):
            with pytest.raises(DirectoryInUse) as refused:
                DirectoryLock(out, shared=shared).acquire()  # flock: another open file, as another process has
            assert f"--out {out} is in use by pid {os.getpid()} on host {socket.gethostname()} since " in str(
                refused.value
            )
        assert not out.exists()  # the lock file is beside the directory, which it does not create
    assert list(tmp_path.iterdir()) == []  # its last holder removes it
    DirectoryLock(out).acquire().release()


def test_parts_share_a_directory_and_a_whole_sweep_waits_for_them(tmp_path, monkeypatch):
    out = tmp_path / "sweep"
    monkeypatch.setattr(sys, "argv", ["ppo-jax", "sweep", "spec.yaml", "--part", "0/2"])  # what the holders record
    first, second = DirectoryLock(out, shared=True).acquire(), DirectoryLock(out, shared=True).acquire()
    with pytest.raises(DirectoryInUse, match="Parts of a sweep share it: run this one with --part I/N too") as refused:
        DirectoryLock(out).acquire()
    assert str(refused.value).count(f"pid {os.getpid()}") == 2  # both holders named
    assert "(ppo-jax sweep spec.yaml --part 0/2)" in str(refused.value)
    first.release()
    with pytest.raises(DirectoryInUse):
        DirectoryLock(out).acquire()
    second.release()
    assert list(tmp_path.iterdir()) == []
    DirectoryLock(out).acquire().release()


def test_a_killed_holder_frees_the_directory_at_once(tmp_path):
    out = tmp_path / "run"
    hold = f"from ppo_jax.storage.locks import DirectoryLock; held = DirectoryLock({str(out)!r}).acquire(); print(1, flush=True); input()"
    holder = subprocess.Popen([sys.executable, "-c", hold], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "1\n"
        with pytest.raises(DirectoryInUse, match=f"pid {holder.pid} on host"):
            DirectoryLock(out).acquire()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert (tmp_path / ".run.lock").exists()  # the file stays, its lock does not
    DirectoryLock(out).acquire().release()


def test_train_on_a_directory_in_use_is_refused_before_compiling(tmp_path, capsys):
    out = tmp_path / "run"
    with DirectoryLock(out):
        assert main(["train", "--out", str(out), "--total-timesteps", "1024", "--no-progress"]) == 2
    stderr = capsys.readouterr().err
    assert stderr.count("\n") == 1 and f"error: --out {out} is in use by pid {os.getpid()}" in stderr
    assert not out.exists()


def test_liveness_of_a_recorded_process():
    me = process_record()
    assert is_alive(me) is True
    assert is_alive({**me, "started": me["started"] + 1}) is (me["started"] is None)  # its pid, reused by another
    assert is_alive({**me, "boot": "another boot"}) is (me["boot"] is None)
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    assert is_alive({**me, "pid": int(done.stdout)}) is False
    assert is_alive({**me, "host": "elsewhere"}) is None  # another host: cannot tell
