"""Files that cannot be read back: the one-line error that names them, moving them aside, and the checks that find them.

A corrupt file that can be recomputed (a sweep's chunk, table or summary; a checkpoint) is moved into
``DIR/corrupt/`` — never deleted — and recomputed, with a warning naming both places::

    set_aside(sweep / "chunks" / "g000-c00001.parquet", sweep)   # -> sweep/corrupt/chunks-g000-c00001.parquet.20250101T120000

One that cannot (config.json, metadata.json, spec.json, plan.json, a finished run's metrics) stays where it is,
so that the directory is still recognized (``--force`` replaces only a ppo-jax directory), and reading it
raises CorruptFileError saying what to do.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from ppo_jax.errors import CorruptFileError

CORRUPT_DIR = "corrupt"
START_OVER = "it cannot be recomputed: restore it from a backup, or start over with --force (or another --out)"
"""What to do about a corrupt file that nothing else can reproduce."""


def corrupt(path, error: BaseException, fix: str | None = START_OVER) -> CorruptFileError:
    """The error for a file that cannot be read back: its path, the reader's complaint (one line) and ``fix`` (if any)."""
    detail = " ".join(str(error).split())[:200]
    message = f"{path} is corrupt or truncated ({type(error).__name__}: {detail})"
    return CorruptFileError(message + (f"; {fix}." if fix else ""))


def set_aside(path, root) -> Path:
    """Move ``path`` (a file or directory inside ``root``) to ``root/corrupt/<its path, / as ->.<time>``; returns where."""
    path, root = Path(path), Path(root)
    name = "-".join(path.relative_to(root).parts) if path.is_relative_to(root) else path.name
    directory = root / CORRUPT_DIR
    directory.mkdir(exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    target, n = directory / f"{name}.{stamp}", 1
    while target.exists():
        target, n = directory / f"{name}.{stamp}-{n}", n + 1
    os.rename(path, target)
    return target


def parquet_rows(path, columns=(), fix: str | None = START_OVER) -> int:
    """The row count in a Parquet file's footer (reading nothing else); CorruptFileError if unreadable or ``columns`` are missing."""
    import pyarrow.parquet as pq

    try:
        metadata = pq.read_metadata(path)
    except FileNotFoundError:
        raise
    except (OSError, ValueError) as error:  # pyarrow: ArrowInvalid (a ValueError), ArrowIOError (an OSError)
        raise corrupt(path, error, fix) from None
    missing = sorted(set(columns) - set(metadata.schema.to_arrow_schema().names))
    if missing:
        raise corrupt(path, ValueError(f"columns {missing} missing"), fix)
    return metadata.num_rows


def read_csv(path, columns=(), fix: str | None = START_OVER):
    """``pd.read_csv(path)``; CorruptFileError if it cannot be parsed or ``columns`` are missing."""
    import pandas as pd

    try:
        table = pd.read_csv(path)
    except ValueError as error:  # the parser's errors, UnicodeDecodeError, no columns at all
        raise corrupt(path, error, fix) from None
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise corrupt(path, ValueError(f"columns {missing} missing"), fix)
    return table
