"""Helpers shared by test modules (not a test module itself)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
"""The repository root (experiments/, CITATION.cff, ...)."""


def snapshot(directory: Path) -> dict[str, bytes]:
    """Name -> bytes of every file directly in ``directory``: equal snapshots mean nothing was touched."""
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}
