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


def faked_slurm_step(rank: int, job_id: int, devices: int = 2) -> dict[str, str]:
    """Environment of process ``rank`` of a 2-task SLURM step on localhost, each with ``devices`` CPU devices and gloo
    collectives: what ``jax.distributed.initialize()`` reads to join a job without a cluster."""
    return {
        "SLURM_JOB_ID": str(job_id),
        "SLURM_STEP_NODELIST": "localhost",
        "SLURM_NTASKS": "2",
        "SLURM_PROCID": str(rank),
        "SLURM_LOCALID": str(rank),
        "JAX_CPU_COLLECTIVES_IMPLEMENTATION": "gloo",
        "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}",
    }
