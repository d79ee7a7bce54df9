"""The host loop of a run: segments of updates, metrics to disk, checkpoints, loggers, and stopping cleanly on a signal.

``ppo-jax train`` / ``ppo-jax rlhf`` call ``run_segments`` with the compiled
segments (``ppo_jax.segments``). After each segment its metrics are appended to
metrics.csv (or kept in memory when there is no run directory) and handed to
the loggers; a checkpoint is written every ``checkpoint_every`` updates, and on
SIGINT or SIGTERM, after which the loop stops and reports it (the run
continues with ``--resume``). Before the first segment (pretraining, compiling)
there is nothing to checkpoint: ``interrupts`` turns those signals into
``Interrupted`` there, so the run stops at once; so does a run without
checkpoints (KeyboardInterrupt, ``waited``). Resumed from a checkpoint, the loop
runs the same compiled segments on the restored state, so the run ends where the
uninterrupted one does, bit for bit. A full disk or an I/O error stops the run
with an error that says so; metrics.csv keeps whole rows only, and ``--resume``
continues from the last checkpoint once the disk is mended.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from typing import NamedTuple

import numpy as np

from ppo_jax.segments import Segments
from ppo_jax.storage.atomic import DISK_ERRORS
from ppo_jax.storage.checkpoints import Checkpoints
from ppo_jax.storage.live_run import LiveRun
from ppo_jax.storage.run_dir import metrics_frame


class Stopped(Exception):
    """A signal stopped the run after a checkpoint; ``signum`` is the signal."""

    def __init__(self, signum: int, update: int):
        super().__init__(f"stopped by {signal.Signals(signum).name} after update {update}")
        self.signum, self.update = signum, update


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM (``signum``) before the run's first segment: pretraining, compiling (``interrupts``)."""

    def __init__(self, signum: int):
        super().__init__(f"interrupted by {signal.Signals(signum).name}")
        self.signum = signum


class RunResult(NamedTuple):
    carry: object
    metrics: dict[str, np.ndarray] | None  # [num_runs, num_updates]; None when they went to metrics.csv
    run_seconds: float
    updates_run: int  # by this process (a resumed run: from its checkpoint on)


@contextlib.contextmanager
def stop_requests():
    """SIGINT and SIGTERM set ``requested[0]`` (to the signal) instead of killing the process, inside the block."""
    requested = [0]

    def handler(signum, frame):
        requested[0] = signum

    with _handled(handler):
        yield requested


@contextlib.contextmanager
def interrupts():
    """SIGINT and SIGTERM raise ``Interrupted(signum)`` inside the block (in the main thread; elsewhere nothing changes).

    Before its first segment a run has nothing to checkpoint, and what it waits on (compiling, pretraining as
    one compiled program) may take minutes: JAX lets the exception out of that wait at once, while the
    compile or program it abandoned runs on in XLA's threads (a process that ends without waiting for
    them: ``ppo_jax.cli.main``).
    """

    def handler(signum, frame):
        raise Interrupted(signum)

    with _handled(handler):
        yield


@contextlib.contextmanager
def _handled(handler):
    """``handler`` on SIGINT and SIGTERM inside the block (in the main thread; elsewhere nothing changes)."""
    previous = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            previous[sig] = signal.signal(sig, handler)
        except ValueError:  # not the main thread: signals keep their handlers
            pass
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def waited(fn, *args):
    """``fn(*args)`` in a helper thread, waited for from this one, so that a signal can interrupt the wait.

    XLA:CPU runs a program with host callbacks (the progress reports of every segment) in the thread that calls
    it, where no signal gets through until it ends: a run without checkpoints is one segment, which may take
    hours. Waiting on a thread lets KeyboardInterrupt out at once; the program runs on (``ppo_jax.cli.leave``).
    """
    outcome = {}

    def target():
        try:
            outcome["value"] = fn(*args)
        except BaseException as error:  # noqa: BLE001 - raised again in the waiting thread
            outcome["error"] = error

    thread = threading.Thread(target=target, name="ppo_jax-segment", daemon=True)
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


@contextlib.contextmanager
def _disk(run: LiveRun | None):
    """A full disk or an I/O error while writing ``run``: the error says what is intact and what to do."""
    try:
        yield
    except OSError as error:
        if run is None or error.errno not in DISK_ERRORS or "--resume" in str(error):  # said already
            raise
        raise OSError(
            error.errno,
            f"{error.strerror}. {run.path} holds every row before it and the checkpoints written: free some space "
            "(or mend the disk), then continue with --resume (or start over with --force).",
        ) from error


def _header(path) -> list[str]:
    """metrics.csv's columns: a run started before a metric existed (``non_finite``) goes on without it when resumed."""
    with open(path) as f:
        return f.readline().rstrip("\r\n").split(",")


def run_segments(
    segments: Segments,
    task,
    cfg,
    seeds,
    carry,
    shared,
    *,
    first_update: int = 0,
    run: LiveRun | None = None,
    checkpoints: Checkpoints | None = None,
    checkpoint_every: int | None = None,
    loggers=(),
    meta: dict | None = None,
) -> RunResult:
    """Run the segments from ``first_update`` (a segment boundary) to the end; see the module docstring.

    ``meta`` is stored with every checkpoint (with ``update`` and ``metrics_bytes``).
    Segment i + 1 is dispatched before segment i's metrics are fetched, so the
    host's work overlaps the program's. With ``checkpoints``, SIGINT and SIGTERM
    stop the loop at the next segment boundary: a checkpoint of the last segment
    handled, and ``Stopped``; without, they act as usual.
    """
    kept = [] if run is None else None
    last_checkpoint, start = first_update, time.perf_counter()
    length = run.metrics_path.stat().st_size if run is not None and run.metrics_path.exists() else 0
    header = _header(run.metrics_path) if length else None  # a resumed run appends the columns it started with

    def handle(first, carry, metrics, requested) -> None:
        """The host's part of a finished segment (while the next one runs): metrics out, checkpoint if due or asked for."""
        nonlocal last_checkpoint, length
        metrics = segments.fetch(metrics, first) if checkpoints is not None else waited(segments.fetch, metrics, first)
        done = first + next(iter(metrics.values())).shape[1]
        if run is None:
            kept.append(metrics)
        else:
            frame = metrics_frame(task, cfg, seeds, metrics, first)
            length = run.append_metrics(frame if header is None else frame.reindex(columns=header))
        for logger in loggers:
            logger.write(first, metrics)
        stop = bool(requested[0]) and done < segments.num_updates
        due = (
            checkpoint_every is not None and done - last_checkpoint >= checkpoint_every and done < segments.num_updates
        )
        if checkpoints is not None and (due or stop):
            if run is not None:
                run.sync_metrics()  # the rows the checkpoint covers are on disk before it is
            checkpoints.save(done, carry, {**(meta or {}), "metrics_bytes": length})
            last_checkpoint = done
        if stop:
            checkpoints.wait()
            raise Stopped(requested[0], done)

    # Without checkpoints a signal stops the run as usual: there is nothing to save and a segment may be long.
    with stop_requests() if checkpoints is not None else contextlib.nullcontext([0]) as requested, _disk(run):
        pending = None
        for first in segments.starts(first_update):
            if requested[0] and pending is not None:  # a stop asked for: the segment run last is the last one
                handle(*pending, requested)  # (XLA:CPU runs a segment with host callbacks as it is dispatched)
            # Dispatch this segment first, then do the host's work for the previous one while it runs.
            if checkpoints is None:  # a signal stops the run as it comes (a checkpointed one: at the boundary)
                carry, metrics = waited(segments.dispatch, cfg, carry, first, shared)
            else:
                carry, metrics = segments.dispatch(cfg, carry, first, shared)
            if pending is not None:
                handle(*pending, requested)
            pending = (first, carry, metrics)
        if pending is not None:
            handle(*pending, requested)
    seconds = time.perf_counter() - start
    metrics = None if kept is None else {name: np.concatenate([m[name] for m in kept], axis=1) for name in kept[0]}
    return RunResult(carry, metrics, seconds, segments.num_updates - first_update)
