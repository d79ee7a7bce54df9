"""What cutting a run into segments costs: one program vs segments of K updates, with and without a run directory.

Cases, each with all seeds vmapped, CartPole-v1 with the standard config:

* ``program``: ``jax.jit(vmap(train))``, the whole run as one program (no metrics leave it until the end),
  the config an argument as ``ppo-jax train`` passes it (closed over as constants, XLA could fold its
  leaves; the segments take it as an argument too);
* ``segK``: the segment loop (``ppo_jax.segments``) with K updates per segment, metrics to the host after each;
* ``segK+csv``: the same, appending every segment's rows to metrics.csv, as ``ppo-jax train --out`` does;
* ``segK+dir``: and checkpointing with Orbax every 5% of the updates, as ``--checkpoint-every 5%`` does
  (20 checkpoints, however short the run: on a run of seconds they are most of the cost).

Cases alternate A B C ... A B C ... over --repeats rounds, so drift on a shared
machine hits all of them alike; the table gives the median and min run seconds
and env steps/s relative to ``program``. Writes JSON.

    python scripts/bench_segments.py --seeds 1 16 --lengths 10 50 --repeats 5
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import jax
import numpy as np

from ppo_jax import PPOConfig
from ppo_jax.rl.task import PPO
from ppo_jax.run_loop import run_segments
from ppo_jax.segments import compile_segments
from ppo_jax.storage.checkpoints import Checkpoints
from ppo_jax.storage.live_run import LiveRun
from ppo_jax.storage.provenance import collect_metadata
from ppo_jax.storage.run_dir import config_record
from ppo_jax.vmap_runs import vmap_runs


def cases(cfg: PPOConfig, seeds: list[int], lengths: list[int], scratch: Path) -> dict:
    """name -> (compile seconds, a function that runs the case once)."""
    keys = jax.numpy.stack([jax.random.key(s) for s in seeds])
    out = {}
    start = time.perf_counter()
    # As ppo-jax train compiled it before segments: the config an argument (its float leaves traced), not constants.
    program = jax.jit(vmap_runs(lambda c, k: PPO.train(c, k), in_axes=(None, 0))).lower(cfg, keys).compile()
    out["program"] = (time.perf_counter() - start, lambda: jax.block_until_ready(program(cfg, keys)).metrics)
    every = max(1, -(-cfg.num_updates // 20))
    for length in lengths:
        segments = compile_segments(PPO, cfg, keys, None, length)

        def loop(segments=segments):
            return run_segments(segments, PPO, cfg, seeds, segments.init(cfg, keys, None), None).metrics

        def with_dir(segments=segments, checkpoint=True):
            run = LiveRun.start(
                Path(tempfile.mkdtemp(dir=scratch)) / "run", config=config_record(PPO, cfg, seeds), metadata={}
            )
            checkpoints = Checkpoints(run.checkpoint_dir) if checkpoint else None
            run_segments(
                segments,
                PPO,
                cfg,
                seeds,
                segments.init(cfg, keys, None),
                None,
                run=run,
                checkpoints=checkpoints,
                checkpoint_every=every,
            )
            if checkpoints is not None:
                checkpoints.close()

        out[f"seg{length}"] = (segments.compile_seconds, loop)
        out[f"seg{length}+csv"] = (0.0, functools.partial(with_dir, checkpoint=False))
        out[f"seg{length}+dir"] = (0.0, with_dir)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--lengths", type=int, nargs="+", default=[10, 50])
    parser.add_argument("--total-timesteps", type=int, default=500_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=Path("bench_results/segments.json"))
    args = parser.parse_args()

    cfg = PPOConfig(env="CartPole-v1", total_timesteps=args.total_timesteps)
    rows = []
    print(
        f"CartPole-v1, {cfg.num_updates} updates x {cfg.batch_size} env steps per seed, {args.repeats} interleaved rounds"
    )
    header = f"{'seeds':>5} {'case':<12} {'compile s':>9} {'median s':>9} {'min s':>7} {'env steps/s':>12} {'vs program':>10}"
    print(header + "\n" + "-" * len(header))
    with tempfile.TemporaryDirectory() as scratch:
        for num_seeds in args.seeds:
            seeds = list(range(num_seeds))
            fns = cases(cfg, seeds, args.lengths, Path(scratch))
            times = {name: [] for name in fns}
            for _, fn in fns.values():
                fn()  # warm up: first-call costs (Orbax, pandas) out of the timing
            for _ in range(args.repeats):
                for name, (_, fn) in fns.items():
                    start = time.perf_counter()
                    fn()
                    times[name].append(time.perf_counter() - start)
            steps = num_seeds * cfg.num_updates * cfg.batch_size
            base = statistics.median(times["program"])
            for name, (compile_s, _) in fns.items():
                median = statistics.median(times[name])
                row = {
                    "seeds": num_seeds,
                    "case": name,
                    "compile_s": round(compile_s, 2),
                    "median_s": round(median, 3),
                    "min_s": round(min(times[name]), 3),
                    "all_s": [round(t, 3) for t in times[name]],
                    "env_steps_per_s": round(steps / median),
                    "relative_throughput": round(base / median, 3),
                }
                rows.append(row)
                print(
                    f"{num_seeds:>5} {name:<12} {compile_s:>9.2f} {median:>9.3f} {min(times[name]):>7.3f} "
                    f"{row['env_steps_per_s']:>12,} {row['relative_throughput']:>10.3f}",
                    flush=True,
                )
    result = {
        "results": rows,
        "config": cfg.to_dict(),
        "metadata": collect_metadata(["python", *sys.argv]),
        "numpy": np.__version__,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
