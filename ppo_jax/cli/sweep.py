"""``ppo-jax sweep SPEC.yaml --out DIR``: a sweep of any task, resumable, in parts, over devices and hosts."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Annotated

import tyro

from ppo_jax.cli.common import initialize_distributed, refuse_empty_out, say
from ppo_jax.errors import SpecError


@dataclasses.dataclass(frozen=True)
class Sweep:
    """Run a sweep from a spec file: settings x seeds as one compiled program per group of static fields.

    Writes a sweep directory at --out: spec.yaml, spec.json, plan.json, metadata.json,
    sweep.log, chunks/*.parquet (one per finished chunk), and once every chunk is
    done metrics.parquet (one row per env x setting x seed x update) and summary.csv.
    Prints the final values of every setting (mean over seeds, 95% bootstrap CI) and which seeds diverged, at
    which update (a diverged run has no final value; the mean is over the others and says so). The spec names its task
    (`task: ppo`, the default, `task: lm` or `task: rlhf`).
    Docs: docs/guide/sweeps.md, docs/concepts/sweep-program.md; parts and hosts: docs/tutorials/distributed.md.
    """

    spec: Annotated[Path, tyro.conf.Positional, tyro.conf.arg(metavar="SPEC.yaml")]
    """The sweep spec (YAML): base config, envs, seeds, and grid / zip / random axes."""
    out: Annotated[Path | None, tyro.conf.arg(metavar="DIR")] = None
    """Sweep directory to write (required unless --dry-run)."""
    envs: Annotated[tuple[str, ...], tyro.conf.arg(metavar="ENV")] = ()
    """Run only these of the spec's envs (e.g. --envs CartPole-v1 Pendulum-v1): the same settings and seeds; --resume needs the same --envs."""
    resume: Annotated[bool, tyro.conf.FlagCreatePairsOff] = False
    """Continue the sweep in --out: run only the chunks without a file (the spec must be unchanged)."""
    force: Annotated[bool, tyro.conf.FlagCreatePairsOff] = False
    """Replace an existing sweep or run directory at --out (the old one is deleted once the new sweep is complete)."""
    dry_run: Annotated[bool, tyro.conf.FlagCreatePairsOff] = False
    """Print what would run and exit: runs, programs and env steps at once, without compiling; then the chunks and memory per device: with --chunk-size N (or a sweep directory's plan) nothing compiles, else one program per distinct shape compiles to read its memory estimate (groups that differ only in branch fields, e.g. objective, share it), with the time the rest will take."""
    checkpoint_every: Annotated[str | None, tyro.conf.arg(metavar="N|P%")] = None
    """Run each chunk in segments and checkpoint it every N updates or P% of them into --out/checkpoints/, so --resume after a kill loses at most a segment, not a chunk."""
    chunk_size: Annotated[str | None, tyro.conf.arg(metavar="N|auto")] = None
    """(setting, seed) pairs per chunk, rounded up to a multiple of the device count (default: the most that fit --memory-budget); auto: that size or one of its balanced halves where short probes on this machine measure it faster (in one process on a CPU, for shapes of at least 10^6 env steps; stopped within 5% of the estimated run time, or after one probe for groups that run under 10 minutes: ppo_jax/sweep/calibrate.py). Another chunk size can change the numbers at float32 rounding; plan.json records the one used."""
    memory_budget: Annotated[str | None, tyro.conf.arg(metavar="SIZE")] = None
    """Memory per device for one chunk, e.g. 8GiB or 500MB (default: 90% of an accelerator's memory; on CPU half the RAM)."""
    part: Annotated[str | None, tyro.conf.arg(metavar="I/N")] = None
    """Run only part I of N (0 <= I < N) of the chunks, e.g. $SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT; parts share --out."""
    distributed: Annotated[bool, tyro.conf.FlagCreatePairsOff] = False
    """Call jax.distributed.initialize() first (SLURM, Open MPI, TPU pods): every host takes its share of each chunk."""
    cache_dir: Annotated[str | None, tyro.conf.arg(metavar="DIR")] = None
    """Persistent compilation cache, so that --resume, parts and later sweeps do not recompile; 'none' turns it off (default: $PPO_JAX_CACHE_DIR, else ~/.cache/ppo_jax/xla)."""


def run_sweep(args: Sweep, argv: list[str]) -> int:
    refuse_empty_out(argv)
    if args.distributed and not args.dry_run:
        initialize_distributed()
    from ppo_jax import sweep

    spec = sweep.load_spec(args.spec)  # every spec error before anything compiles
    if args.envs:
        from ppo_jax.sweep.spec import only_envs

        spec = only_envs(spec, args.envs)
    cache = "auto" if args.cache_dir is None else args.cache_dir
    chunk_size = sweep.parse_chunk_size(args.chunk_size)
    if args.dry_run:
        say(sweep.dry_run(spec, args.out, chunk_size=chunk_size, memory_budget=args.memory_budget, cache_dir=cache))
        return 0
    if args.out is None:
        raise SpecError("--out DIR is required: the sweep writes its chunks and table there (or use --dry-run).")
    import signal

    signal.signal(signal.SIGTERM, signal.default_int_handler)  # SLURM preemption: stop like Ctrl-C
    try:
        sweep.run(
            spec,
            args.out,
            resume=args.resume,
            force=args.force,
            chunk_size=chunk_size,
            memory_budget=args.memory_budget,
            part=args.part,
            cache_dir=cache,
            command=argv,
            checkpoint_every=args.checkpoint_every,
        )
    except KeyboardInterrupt:
        print(
            f"interrupted: finished chunks are saved in {args.out}; rerun with --resume to run the rest",
            file=sys.stderr,
        )
        return 130
    import jax

    if jax.process_index() != 0:  # multi-host: process 0 reports
        return 0
    summary = args.out / "summary.csv"
    if summary.exists():
        import pandas as pd

        say(sweep.format_summary(pd.read_csv(summary), spec.task))
    say(f"sweep directory: {args.out}")
    return 0
