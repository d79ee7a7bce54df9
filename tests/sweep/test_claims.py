"""Claims of chunks by the parts of a sweep: a live claim is respected, a dead one taken over, another host's only on --resume."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from ppo_jax.storage.locks import process_record
from ppo_jax.sweep import claims as claims_module
from ppo_jax.sweep.claims import STALE, Claims


def never() -> bool:
    return False


def claimed_by(claims: Claims, name: str) -> dict:
    return json.loads(claims.path(name).read_text())


def test_a_chunk_is_claimed_once_until_released(tmp_path):
    first, second = Claims(tmp_path / "claims"), Claims(tmp_path / "claims")  # two parts (one pid: alive)
    assert first.claim("g000-c00000", never) is None
    assert claimed_by(first, "g000-c00000")["pid"] == os.getpid()
    assert second.claim("g000-c00000", never).startswith(f"claimed by pid {os.getpid()} on host ")
    assert second.claim("g000-c00001", lambda: True) == "done by another process"
    first.release("g000-c00000")
    assert not first.path("g000-c00000").exists() and second.claim("g000-c00000", never) is None
    second.close()
    assert sorted(p.name for p in (tmp_path / "claims").iterdir()) == [".lock"]


def test_the_claim_of_a_process_that_is_gone_is_taken_over(tmp_path):
    claims = Claims(tmp_path / "claims")
    claims.directory.mkdir()
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    me = process_record()
    for name, record in {"dead": {**me, "pid": int(gone.stdout)}, "reused": {**me, "started": -1}}.items():
        claims.path(name).write_text(json.dumps(record))  # a killed part; a later process that got its pid
        assert claims.claim(name, never) is None
        assert (claimed_by(claims, name)["pid"], claimed_by(claims, name)["started"]) == (me["pid"], me["started"])
    claims.close()


def test_another_hosts_claim_is_taken_over_only_on_resume_once_stale(tmp_path):
    joining, resuming = Claims(tmp_path / "claims"), Claims(tmp_path / "claims", take_over_remote=True)
    joining.directory.mkdir()
    path = joining.path("g000-c00000")
    path.write_text(json.dumps({**process_record(), "host": "elsewhere"}))
    assert "on host elsewhere" in resuming.claim("g000-c00000", never)  # touched lately: alive as far as we know
    old = time.time() - STALE - 60
    os.utime(path, (old, old))  # no heartbeat for longer than STALE
    assert "on host elsewhere" in joining.claim("g000-c00000", never)
    assert resuming.claim("g000-c00000", never) is None
    resuming.close()

    path.write_text("")  # a claimant killed while writing its claim: judged by its age alone
    assert joining.claim("g000-c00000", never).startswith("claimed by pid ?")
    os.utime(path, (old, old))
    assert joining.claim("g000-c00000", never) is None
    joining.close()


def test_a_live_claim_is_kept_fresh_by_its_heartbeat(tmp_path, monkeypatch):
    monkeypatch.setattr(claims_module, "HEARTBEAT", 0.05)
    with Claims(tmp_path / "claims") as claims:
        assert claims.claim("g000-c00000", never) is None
        old = time.time() - STALE - 60
        os.utime(claims.path("g000-c00000"), (old, old))
        deadline = time.monotonic() + 10
        while claims.path("g000-c00000").stat().st_mtime < old + 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert claims.path("g000-c00000").stat().st_mtime > time.time() - 5
    assert not claims.path("g000-c00000").exists()  # released on close
