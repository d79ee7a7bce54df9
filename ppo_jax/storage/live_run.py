"""A run directory written while the run goes, and continued after a stop (``ppo-jax train --out DIR [--resume]``).

While it runs, DIR holds (the finished layout: ``ppo_jax.storage.run_dir``)::

    config.json     written at the start
    metadata.json   "status": "running", then "interrupted" (a signal) or "complete"
    metrics.csv     appended after every segment of updates (``ppo_jax.segments``): rows in
                    segment order, within one seed then update, so it can be watched
    checkpoints/    the whole training state every --checkpoint-every (Orbax,
                    ``ppo_jax.storage.checkpoints``); removed when the run completes
    tensorboard/    with --log tensorboard (``ppo_jax.loggers``)

and when it completes, params.msgpack and evaluation.csv are added. A checkpoint
records how many bytes of metrics.csv it covers; a resumed run cuts the file
back to that length, so rows written after it (or half a row, after a kill) are
dropped and written again by the resumed run. Rows go in whole or not at all
(``atomic.append_text``): a full disk leaves the file as it was. One process
writes the directory at a time (``ppo_jax.storage.locks``, taken by ``run_task``).

A new run with ``--force`` over an existing run directory runs in
``DIR.incomplete`` beside it and replaces DIR only once it is complete, so the
old run is not lost if the new one stops; ``--resume`` finds it there.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ppo_jax.errors import ConfigError
from ppo_jax.storage.atomic import absolute, append_text, read_json, write_directory, write_json
from ppo_jax.storage.checkpoints import CHECKPOINT_DIR
from ppo_jax.storage.corrupt import corrupt
from ppo_jax.storage.run_dir import CONFIG_FILE, METADATA_FILE, METRICS_FILE, is_output_dir

STAGING_SUFFIX = ".incomplete"


def staging_dir(out: Path) -> Path:
    return out.parent / (out.name + STAGING_SUFFIX)


def is_unfinished(path: Path) -> bool:
    """A run directory whose run has not completed (its metadata says running or interrupted); CorruptFileError if unreadable."""
    if not (path / CONFIG_FILE).is_file() or not (path / METADATA_FILE).is_file():
        return False
    return read_json(path / METADATA_FILE).get("status") in ("running", "interrupted")


def find_unfinished(out) -> Path:
    """Where the unfinished run of ``--out out`` is (``out`` or ``out.incomplete``); ConfigError if none."""
    out = absolute(out)
    for path in (staging_dir(out), out):
        if is_unfinished(path):
            return path
    if is_output_dir(out):
        raise ConfigError(f"--resume: the run in {out} is complete; there is nothing to resume.")
    raise ConfigError(
        f"--resume: {out} holds no unfinished ppo-jax run (no config.json and metadata.json with "
        "status running or interrupted); start it without --resume."
    )


class LiveRun:
    """The directory a run writes as it goes: ``path`` (``out``, or its staging sibling), replacing ``out`` at the end."""

    def __init__(self, path: Path, out: Path):
        self.path, self.out = absolute(path), absolute(out)

    @classmethod
    def start(cls, out, *, config: dict, metadata: dict) -> LiveRun:
        """A new run at ``out`` (checked with ``prepare_out_dir`` first): staged beside an existing run, else in place."""
        out = absolute(out)
        has_run = out.exists() and any(out.iterdir())
        path = staging_dir(out) if has_run else out
        if path.exists() and path != out:
            shutil.rmtree(path)  # a staged run that never completed, replaced by --force
        path.mkdir(parents=True, exist_ok=True)
        write_json(path / CONFIG_FILE, config)
        write_json(path / METADATA_FILE, {**metadata, "status": "running"})
        (path / METRICS_FILE).unlink(missing_ok=True)
        return cls(path, out)

    @classmethod
    def resume(cls, out) -> LiveRun:
        path = find_unfinished(out)
        out = absolute(out)
        run = cls(path, out)
        run.update_metadata(status="running")
        return run

    @property
    def checkpoint_dir(self) -> Path:
        return self.path / CHECKPOINT_DIR

    @property
    def metrics_path(self) -> Path:
        return self.path / METRICS_FILE

    def config(self) -> dict:
        return read_json(self.path / CONFIG_FILE)

    def metadata(self) -> dict:
        return read_json(self.path / METADATA_FILE)

    def update_metadata(self, **values) -> None:
        write_json(self.path / METADATA_FILE, {**self.metadata(), **values})

    def append_metrics(self, frame) -> int:
        """Append rows to metrics.csv (the header first, if new); returns the file's length in bytes (``sync_metrics`` makes it durable)."""
        path = self.metrics_path
        new = not path.exists() or path.stat().st_size == 0
        return append_text(path, frame.to_csv(index=False, header=new, lineterminator="\n"))

    def sync_metrics(self) -> None:
        """fsync metrics.csv: before a checkpoint that covers its rows."""
        if self.metrics_path.exists():
            with open(self.metrics_path, "rb") as f:
                os.fsync(f.fileno())

    def cut_metrics(self, length: int) -> None:
        """Cut metrics.csv back to ``length`` bytes (what a checkpoint covers), checking that a header and whole rows remain."""
        path = self.metrics_path
        if length == 0:
            path.unlink(missing_ok=True)
            return
        if not path.exists() or path.stat().st_size < length:
            raise corrupt(path, ValueError(f"shorter than the {length} bytes its checkpoint covers"))
        with open(path, "r+b") as f:
            header = f.readline()
            f.seek(length - 1)
            if not header.startswith(b"seed,update,env_steps,") or f.read(1) != b"\n":
                raise corrupt(path, ValueError("no header, or the rows its checkpoint covers do not end a line"))
            f.truncate(length)

    def complete(self, write_final) -> Path:
        """``write_final(path)`` adds the final files; then checkpoints go and the run replaces ``out`` if it was staged."""
        write_final(self.path)
        shutil.rmtree(self.checkpoint_dir, ignore_errors=True)
        self.update_metadata(status="complete")
        if self.path == self.out:
            return self.out
        staged = self.path

        def move(tmp: Path) -> None:
            tmp.rmdir()
            os.rename(staged, tmp)

        return write_directory(self.out, move)[0]
