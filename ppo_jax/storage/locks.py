"""One writer per output directory: an OS lock on it, released by the kernel when its process dies, naming its holder.

    with DirectoryLock(out):                  # ppo-jax train / sweep --out DIR: DIR to itself
        ...                                   # another process on DIR meanwhile: DirectoryInUse, naming this one
    with DirectoryLock(out, shared=True):     # ppo-jax sweep --part I/N: parts share DIR (ppo_jax.sweep.claims)

The lock is ``fcntl.flock`` on ``.<name>.lock`` beside DIR (in its parent), not inside it: DIR itself is
created and replaced by renames (a sweep directory appears complete, ``--force`` moves the old one aside,
a run replacing another is staged in ``DIR.incomplete``), which would carry a lock file inside it away from
its holder. The kernel drops a flock when its process dies, however it dies, so a killed run never
leaves a stale lock. The file holds one JSON line per holder (host, pid, start time, command), read only
to name the holder to a refused process; the last holder to leave removes it. Linux maps flock over NFS
to the server's locks (NFSv4, or v3 with lockd), so processes on other hosts see it too.
"""

from __future__ import annotations

import datetime
import fcntl
import json
import os
import shlex
import socket
import sys
import weakref
from pathlib import Path

from ppo_jax.errors import ConfigError, DirectoryInUse
from ppo_jax.storage.atomic import absolute


def lock_path(out) -> Path:
    """``.<name>.lock`` beside ``out``."""
    out = absolute(out)
    return out.parent / f".{out.name}.lock"


def _boot_id() -> str | None:
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return None


def _start_tick(pid: int) -> int | None:
    """When process ``pid`` started, in clock ticks since boot (Linux; field 22 of /proc/PID/stat), else None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def process_record() -> dict:
    """This process: host, pid, boot id and start tick (what tells it from a later process with its pid), time, command."""
    return {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "boot": _boot_id(),
        "started": _start_tick(os.getpid()),
        "since": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "command": shlex.join(sys.argv),
    }


def is_alive(record: dict) -> bool | None:
    """Whether the process ``record`` describes still runs: True or False on this host; None on another (no way to tell)."""
    if record.get("host") != socket.gethostname():
        return None
    if None not in (record.get("boot"), _boot_id()) and record["boot"] != _boot_id():
        return False  # written before this host rebooted
    pid = record.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        pass
    started = _start_tick(pid)
    return record.get("started") is None or started is None or started == record["started"]


def describe(record: dict) -> str:
    """``pid 123 on host h since 2025-01-01T12:00:00+00:00 (ppo-jax sweep ...)``."""
    text = f"pid {record.get('pid', '?')} on host {record.get('host', '?')} since {record.get('since', '?')}"
    return text + (f" ({record['command']})" if record.get("command") else "")


def _holders(fd: int) -> list[dict]:
    """The records in a lock file, less those of processes on this host that are gone."""
    size = os.fstat(fd).st_size
    records = []
    for line in os.pread(fd, size, 0).decode(errors="replace").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and is_alive(record) is not False:
            records.append(record)
    return records


def _release(fd: int, path, shared: bool) -> None:
    """Leave the lock: the last holder removes the file (a shared holder first checks that no other one is left)."""
    try:
        if shared:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # not atomic: our shared lock may go first; we leave anyway
        os.unlink(path)
    except OSError:  # another holder is left (or the file is gone already)
        pass
    finally:
        os.close(fd)


class DirectoryLock:
    """The lock of output directory ``out``: exclusive (a run, a whole sweep) or ``shared`` (the parts of a sweep).

    Held from ``acquire()`` (or ``with``) until ``release()``, or until the object is garbage collected
    (a local variable holds it for as long as its function runs), or until the process dies.
    """

    def __init__(self, out, *, shared: bool = False):
        self.out, self.path, self.shared = absolute(out), lock_path(out), shared
        self._finalizer = None

    def acquire(self) -> DirectoryLock:
        """Take the lock, or raise DirectoryInUse naming who holds it. Creates DIR's parent, never DIR."""
        while True:
            fd = self._open()
            try:
                fcntl.flock(fd, (fcntl.LOCK_SH if self.shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
            except BlockingIOError:
                holders = _holders(fd)
                os.close(fd)
                raise DirectoryInUse(self._refusal(holders)) from None
            try:
                if os.stat(self.path).st_ino == os.fstat(fd).st_ino:
                    break
            except FileNotFoundError:
                pass
            os.close(fd)  # the holder we waited on left and removed the file: lock the next one
        if not self.shared:
            os.ftruncate(fd, 0)
        os.write(fd, (json.dumps(process_record()) + "\n").encode())
        self._finalizer = weakref.finalize(self, _release, fd, self.path, self.shared)
        return self

    def _open(self) -> int:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            return os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        except OSError as error:
            raise ConfigError(f"cannot create --out {self.out}: {error.strerror} ({error.filename}).") from None

    def release(self) -> None:
        if self._finalizer is not None:
            self._finalizer()
            self._finalizer = None

    def _refusal(self, holders: list[dict]) -> str:
        who = "; ".join(describe(h) for h in holders[-3:]) or "another process (it has not written its name yet)"
        parts = not self.shared and any("--part" in h.get("command", "") for h in holders)
        hint = " Parts of a sweep share it: run this one with --part I/N too." if parts else ""
        return (
            f"--out {self.out} is in use by {who}. Wait for it to finish, or stop it (a process that stops or "
            f"is killed frees the directory at once).{hint}"
        )

    def __enter__(self) -> DirectoryLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
