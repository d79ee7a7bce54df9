"""Checkpoints of a run's whole training state, written with Orbax (no pickle): ``DIR/checkpoints/<update>/``.

    checkpoints = Checkpoints(run_dir / "checkpoints", keep=3)
    checkpoints.save(update, carry, {"metrics_bytes": ...})    # after ``update`` updates of every run (asynchronous)
    carry, meta = checkpoints.restore(like=carry0)              # the newest readable one

``carry`` is the vmapped training state between segments (``ppo_jax.segments``):
parameters, optimizer state, normalization statistics, env states, PRNG keys,
adaptive coefficients; ``meta`` a JSON dict stored beside it (the update count
is added as ``meta["update"]``). Each checkpoint is one Orbax step, written to a
temporary directory and renamed when complete, so a kill leaves the previous
ones intact; the newest ``keep`` are kept. PRNG keys are stored as their key data.

A checkpoint that cannot be read (a corrupted file) is moved into the run's
``corrupt/`` directory (``ppo_jax.storage.corrupt``) with a warning naming it, and
the one before it is used (the run writes it again); with none left, restoring
raises NoCheckpoint.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import warnings
from pathlib import Path

import jax
import numpy as np

from ppo_jax.errors import ConfigError
from ppo_jax.storage.corrupt import CORRUPT_DIR, set_aside

CHECKPOINT_DIR = "checkpoints"


class NoCheckpoint(ConfigError):
    """No readable checkpoint to resume from: the run must start over."""


def _is_key(x) -> bool:
    return jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)


def to_arrays(carry) -> dict[str, np.ndarray]:
    """The leaves of ``carry`` as ``{"000000": array, ...}`` in tree order (keys as their uint32 key data).

    Copies: an asynchronous save writes them after the caller has moved on (and may change its own arrays).
    """
    leaves = jax.device_get([jax.random.key_data(x) if _is_key(x) else x for x in jax.tree.leaves(carry)])
    return {f"{i:06d}": np.array(x, copy=True) for i, x in enumerate(leaves)}


def from_arrays(arrays: dict, like):
    """The inverse of ``to_arrays``: ``like``'s tree (a carry of the same run) with the stored leaves."""
    leaves, treedef = jax.tree.flatten(like)
    if len(arrays) != len(leaves):
        raise ValueError(f"the checkpoint holds {len(arrays)} arrays, this run's state has {len(leaves)}")
    restored = []
    for i, leaf in enumerate(leaves):
        value = np.asarray(arrays[f"{i:06d}"])
        expected = jax.random.key_data(leaf).shape if _is_key(leaf) else leaf.shape
        if value.shape != tuple(expected):
            raise ValueError(f"array {i:06d} has shape {value.shape}, this run's state has {tuple(expected)}")
        restored.append(jax.random.wrap_key_data(value, impl=jax.random.key_impl(leaf)) if _is_key(leaf) else value)
    return jax.tree.unflatten(treedef, restored)


class Checkpoints:
    """The checkpoints of one run directory (an Orbax ``CheckpointManager`` over ``directory``).

    ``root``: the run (or sweep) directory whose ``corrupt/`` receives unreadable ones (default: ``directory``'s parent).
    """

    def __init__(self, directory, keep: int = 2, root=None):
        import orbax.checkpoint as ocp

        logging.getLogger("absl").setLevel(logging.WARNING)  # Orbax logs every save at INFO
        logging.getLogger("absl").addFilter(_not_raised_again)
        self.directory = Path(directory).absolute()
        self.root = self.directory.parent if root is None else Path(root).absolute()
        self._ocp = ocp
        # Asynchronous: ``save`` returns once the arrays are copied to the host and Orbax writes them while
        # training goes on (a kill mid-write leaves an unfinished temporary directory, which Orbax ignores).
        options = ocp.CheckpointManagerOptions(max_to_keep=keep, enable_async_checkpointing=True, create=True)
        self._manager = ocp.CheckpointManager(self.directory, options=options)

    def updates(self) -> list[int]:
        """Update counts of the stored (complete) checkpoints, oldest first."""
        self.wait()
        self._manager.reload()
        return sorted(self._manager.all_steps())

    def save(self, update: int, carry, meta: dict) -> Path:
        """Write the state after ``update`` updates (complete or not at all); returns its directory."""
        ocp = self._ocp
        args = ocp.args.Composite(
            state=ocp.args.StandardSave(to_arrays(carry)), meta=ocp.args.JsonSave({**meta, "update": int(update)})
        )
        with self._writes():  # the previous save's failure, if any, surfaces here
            self._manager.save(int(update), args=args, force=True)
        return self.directory / str(update)

    def wait(self) -> None:
        """Block until the checkpoints being written are complete (before exiting on a signal)."""
        with self._writes():
            self._manager.wait_until_finished()

    def restore(self, like) -> tuple[object, dict]:
        """The newest readable checkpoint: ``(carry, meta)``; unreadable newer ones are moved aside with a warning.

        Raises NoCheckpoint when there is no readable checkpoint.
        """
        ocp = self._ocp
        for update in reversed(self.updates()):
            path = self.directory / str(update)
            try:
                restored = self._manager.restore(
                    update,
                    args=ocp.args.Composite(
                        state=ocp.args.StandardRestore(_template(like)), meta=ocp.args.JsonRestore()
                    ),
                )
                return from_arrays(restored.state, like), dict(restored.meta)
            except Exception as error:  # noqa: BLE001 - any unreadable checkpoint falls back to the previous one
                moved = set_aside(path, self.root)  # the run writes this update again
                self._manager.reload()
                warnings.warn(
                    f"checkpoint {path} cannot be read ({type(error).__name__}: {' '.join(str(error).split())[:200]}); "
                    f"moved it to {moved}, using the one before it",
                    stacklevel=2,
                )
        corrupt_dir = self.root / CORRUPT_DIR
        unreadable = f" (unreadable ones are in {corrupt_dir})" if corrupt_dir.is_dir() else ""
        raise NoCheckpoint(
            f"no readable checkpoint in {self.directory}{unreadable}, so the run cannot be resumed; "
            "start it over with --force (or another --out)."
        )

    def close(self) -> None:
        """Wait for the checkpoints being written, then release the manager."""
        self.wait()
        self._manager.close()

    @contextlib.contextmanager
    def _writes(self):
        """A write Orbax failed (in its own threads: raised where it is waited for) as an OSError with its errno."""
        try:
            yield
        except Exception as error:
            code = error.errno if isinstance(error, OSError) else _os_error(str(error))
            if not code:
                raise
            raise OSError(
                code,
                f"could not write a checkpoint in {self.directory}: {os.strerror(code)}; the ones before it are "
                "intact: free some space (or mend the disk), then continue with --resume",
            ) from error


def _not_raised_again(record: logging.LogRecord) -> bool:
    """Drop Orbax's own report (with traceback) of a write its threads failed: ``Checkpoints`` raises that error."""
    return record.levelno < logging.ERROR or f"{os.sep}orbax{os.sep}" not in record.pathname


def _os_error(message: str) -> int | None:
    """The errno in a tensorstore error (``... [os_error_code='28']``), if any."""
    match = re.search(r"os_error_code='?(\d+)", message)
    return int(match[1]) if match else None


def _template(like) -> dict[str, np.ndarray]:
    """Empty numpy arrays shaped like ``to_arrays(like)``: ``restore`` reads the stored arrays as numpy."""
    leaves = [jax.random.key_data(x) if _is_key(x) else x for x in jax.tree.leaves(like)]
    return {f"{i:06d}": np.empty(x.shape, x.dtype) for i, x in enumerate(leaves)}
