"""Chunks claimed by the parts of a sweep (``--part I/N``), so that no chunk runs twice and a dead part's chunk runs again.

Parts share the sweep directory (each holds its lock shared, ``ppo_jax.storage.locks``). Before running a
chunk a part claims it: ``DIR/claims/<chunk>.json``, created with ``O_CREAT | O_EXCL``, holding the
claimant's host, pid, boot id, process start and command. A part skips a chunk whose file is written or
whose claim belongs to a live process, and takes over the claim of a dead one:

- on the same host, a claimant is dead when its pid is gone or belongs to a later process (another
  start tick, another boot: ``locks.is_alive``);
- on another host its pid cannot be checked. A live claimant touches its claims every ``HEARTBEAT``
  seconds, so a claim untouched for ``STALE`` seconds (by the file system's clock, which stamps both,
  so the hosts' clocks need not agree) belongs to a dead or hung part. It is taken over only on
  ``--resume``, where the user reruns a part they know stopped; a part that merely joins never does.

Checking, removing and creating a claim happen under an exclusive flock of ``DIR/claims/.lock``, so two
parts never both take over one claim. A claim is removed once its chunk's file is written (or its run
fails); the directory goes when the table is merged.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
from collections.abc import Callable
from pathlib import Path

from ppo_jax.storage.locks import describe, is_alive, process_record

HEARTBEAT = 30.0
STALE = 300.0


class Claims:
    """This process's claims in ``directory``; ``take_over_remote``: take over stale claims of other hosts (``--resume``)."""

    def __init__(self, directory, *, take_over_remote: bool = False):
        self.directory, self.take_over_remote = Path(directory), take_over_remote
        self._held: set[str] = set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def path(self, name: str) -> Path:
        return self.directory / f"{name}.json"

    def claim(self, name: str, done: Callable[[], bool]) -> str | None:
        """Claim chunk ``name`` unless ``done()``; None when this process holds it now, else why not (for the log)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        with open(self.directory / ".lock", "a+") as mutex:
            fcntl.flock(mutex, fcntl.LOCK_EX)
            if done():
                return "done by another process"
            path = self.path(name)
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                holder = _read(path)
                if not self._dead(path, holder, mutex):
                    return f"claimed by {describe(holder)}"
                path.unlink()
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            with os.fdopen(fd, "w") as f:
                json.dump(process_record(), f)
        self._held.add(name)
        self._beat()
        return None

    def release(self, name: str) -> None:
        if name in self._held:
            self._held.discard(name)
            self.path(name).unlink(missing_ok=True)

    def _dead(self, path: Path, holder: dict, mutex) -> bool:
        alive = is_alive(holder) if holder else None
        if alive is not None:
            return not alive
        if holder and not self.take_over_remote:
            return False
        os.utime(mutex.fileno())  # now, by the file system's clock
        return os.fstat(mutex.fileno()).st_mtime - path.stat().st_mtime > STALE

    def _beat(self) -> None:
        """Touch the claims held every HEARTBEAT seconds, from a daemon thread (started on the first claim)."""
        if self._thread is not None:
            return

        def beat():
            while not self._stop.wait(HEARTBEAT):
                for name in list(self._held):
                    try:
                        os.utime(self.path(name))
                    except OSError:
                        pass

        self._thread = threading.Thread(target=beat, name="ppo_jax-claims", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop the heartbeat and remove the claims still held."""
        self._stop.set()
        for name in list(self._held):
            self.release(name)

    def __enter__(self) -> Claims:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _read(path: Path) -> dict:
    """A claim's record; {} if it is unreadable (its claimant was killed while writing it: stale once untouched for STALE)."""
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}
