"""Atomic writes: a file or a directory is either complete or absent, and nothing a user made is lost.

A file is written to a temporary sibling and ``os.replace``-d into place. A
directory is written complete into a temporary sibling and renamed into place;
an existing one (replaced with ``force``) is moved aside first, put back if the
final rename fails, and deleted only once the new one is in place. Text appended
to a file (metrics.csv, sweep.log) goes in whole or not at all. So a full disk or
an I/O error (OSError, naming the file) leaves every file as it was before the write.

JSON is written in one layout everywhere: like ``indent=2``, except that a list
of scalars stays on one line (a chunk's pairs, a stacked leaf); NaN becomes
null (strict JSON), +-inf stays (Python's json writes Infinity).
"""

from __future__ import annotations

import errno
import json
import math
import os
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ppo_jax.errors import ConfigError
from ppo_jax.storage.corrupt import corrupt


def absolute(path) -> Path:
    """``path`` made absolute with "." and ".." normalized, symlinks kept."""
    return Path(os.path.abspath(os.fspath(path)))


def _sibling(path: Path, kind: str) -> Path:
    return path.parent / f".{path.name}.{kind}-{uuid.uuid4().hex[:8]}"


def json_safe(value):
    """NaN -> None, numpy scalars -> Python, tuples -> lists, recursively."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, np.ndarray):
        return json_safe(value.tolist())
    if isinstance(value, (np.floating, np.integer, np.bool_)):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def dumps(value, indent: str = "") -> str:
    """JSON text in the one layout (see the module docstring); ``value`` must be ``json_safe``."""
    inner = indent + "  "
    if isinstance(value, dict) and value:
        items = [f"{inner}{json.dumps(k)}: {dumps(v, inner)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + f"\n{indent}}}"
    if isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value):
        return "[\n" + ",\n".join(inner + dumps(v, inner) for v in value) + f"\n{indent}]"
    return json.dumps(value)


DISK_ERRORS = {errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EFBIG, errno.EROFS}
"""Errors of a write (a full disk, a quota, a failing or read-only disk) that a rerun gets past once the disk is mended."""


def _could_not_write(path, error: OSError) -> OSError:
    """``error`` (a full disk, an I/O error) restated to name ``path``, not the temporary file it happened in."""
    message = f"could not write {path}: {error.strerror or error}"
    return OSError(error.errno, message) if error.errno else OSError(message)


def write_file(path, write: Callable[[Path], None]) -> Path:
    """Call ``write(tmp)`` on a temporary sibling of ``path``, fsync it and rename it to ``path``."""
    path = absolute(path)
    tmp = _sibling(path, "tmp")
    try:
        write(tmp)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as error:
        raise _could_not_write(path, error) from error
    finally:
        tmp.unlink(missing_ok=True)
    return path


def append_text(path, text: str) -> int:
    """Append ``text`` to ``path`` (created if missing): all of it, or none — a failed write is cut back. Returns the new length."""
    data = memoryview(text.encode())
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        length = os.lseek(fd, 0, os.SEEK_END)
        try:
            written = 0
            while written < len(data):
                written += os.write(fd, data[written:])
        except OSError as error:
            os.ftruncate(fd, length)
            raise _could_not_write(path, error) from error
        return length + len(data)
    finally:
        os.close(fd)


def write_json(path, value) -> Path:
    """``value`` as JSON at ``path``, atomically."""
    text = dumps(json_safe(value)) + "\n"
    return write_file(path, lambda tmp: tmp.write_text(text))


def read_json(path):
    """The JSON value in ``path``; CorruptFileError, naming it, if it is not valid JSON (``ppo_jax.storage.corrupt``)."""
    try:
        return json.loads(Path(path).read_text())
    except ValueError as error:  # JSONDecodeError, UnicodeDecodeError
        raise corrupt(path, error) from None


def check_out_dir(
    path,
    force: bool,
    *,
    replaceable: Callable[[Path], bool],
    what: str,
    marker: str,
    error: type[ConfigError] = ConfigError,
) -> None:
    """Check, before anything compiles, that a directory can be written at ``path``.

    ConfigError if ``path`` is a file; if it is a non-empty directory that
    ``replaceable`` rejects (not one of ours, by ``marker``: a guard against
    ``--out ~ --force``), with or without ``force`` (the message advises another
    --out, not --force); if it is one of ours and ``force`` is False (the message
    advises --force); or if the nearest existing parent is not a writable
    directory. Creates nothing. ``error``: the ConfigError subclass raised.
    """
    path = absolute(path)
    if path.exists() or path.is_symlink():
        if not path.is_dir():
            raise error(f"--out {path} exists and is not a directory; choose another --out.")
        if any(path.iterdir()):
            if not replaceable(path):  # --force would refuse it too: advise only what works
                raise error(
                    f"--out {path} is not empty and is not a {what} ({marker}); refusing to replace it"
                    f"{' even with --force' if force else ''} (--force replaces only a {what}). Choose another --out."
                )
            if not force:
                raise error(
                    f"--out {path} exists and is not empty; pass --force to replace it, or choose another --out."
                )
    parent = path.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise error(f"cannot create --out {path}: {parent} is not a directory.")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise error(f"cannot create --out {path}: {parent} is not writable.")


def _remove(path: Path) -> None:
    if path.is_symlink() or not path.is_dir():
        path.unlink(missing_ok=True)
    else:
        shutil.rmtree(path, ignore_errors=True)


def write_directory(
    path, write: Callable[[Path], None], *, keep_old: bool = False, replace: bool = True
) -> tuple[Path, Path | None]:
    """Write a directory at ``path`` atomically: ``write(tmp)`` fills a fresh temporary sibling, renamed into place.

    Whatever was at ``path`` (the caller checked it may go, ``check_out_dir``) is
    moved aside first and, once the new directory is in place, deleted — or
    returned to the caller with ``keep_old`` (who deletes it later). If
    ``write`` fails, the temporary directory is removed and ``path`` untouched (an OSError names ``path``);
    if the final rename fails, the old directory is put back and the error names
    the complete temporary one.

    With ``replace=False`` nothing is moved aside: the rename fails (OSError, the
    temporary directory removed) if ``path`` is a non-empty directory by then —
    how parts of a sweep racing to create one directory agree on one.

    Returns ``(path, old)``: the absolute path and, with ``keep_old``, where the old one is (else None).
    """
    path = absolute(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _sibling(path, "tmp")
    tmp.mkdir()
    try:
        write(tmp)
    except OSError as error:
        shutil.rmtree(tmp, ignore_errors=True)
        raise _could_not_write(path, error) from error
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if not replace:
        try:
            os.rename(tmp, path)
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return path, None
    old = None
    try:
        if path.exists() or path.is_symlink():
            old = _sibling(path, "old")
            os.rename(path, old)
        os.rename(tmp, path)
    except OSError as error:
        if old is not None and not (path.exists() or path.is_symlink()):
            try:
                os.rename(old, path)  # put the previous directory back
                old = None
            except OSError:
                pass
        where = f"; the previous one is at {old}" if old is not None else ""
        raise OSError(
            f"could not move the finished output into {path} ({error}); it is complete at {tmp}{where}"
        ) from error
    if old is not None and not keep_old:
        _remove(old)
        old = None
    return path, old


def remove_replaced(path: Path, old) -> None:
    """Delete ``old``, a directory ``write_directory(path, keep_old=True)`` moved aside (and only such a one)."""
    if old and Path(old).name.startswith(f".{Path(path).name}.old-") and Path(old).exists():
        _remove(Path(old))
