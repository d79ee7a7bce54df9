"""Helpers shared by test modules (not a test module itself)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
"""The repository root (experiments/, CITATION.cff, ...)."""


def snapshot(directory: Path) -> dict[str, bytes]:
    """Name -> bytes of every file directly in ``directory``: equal snapshots mean nothing was touched."""
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def interrupt_after_first_chunk(monkeypatch) -> None:
    """Make a sweep raise KeyboardInterrupt (as Ctrl-C or SIGTERM between chunks) when it finishes its second chunk,
    after the first was written; ``monkeypatch.undo()`` or a new ``setattr`` restores the writer."""
    from ppo_jax.sweep import sweep_dir

    write_chunk, written = sweep_dir.write_chunk, []

    def interrupt_after_first(*args, **kwargs):
        if written:
            raise KeyboardInterrupt
        written.append(write_chunk(*args, **kwargs))
        return written[-1]

    monkeypatch.setattr(sweep_dir, "write_chunk", interrupt_after_first)
