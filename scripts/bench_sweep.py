"""A sweep as one program against the same runs as separate ``ppo-jax train`` processes.

CartPole-v1, standard config, a grid of 4 clip_eps x 4 ent_coef = 16 settings x 8
seeds = 128 runs (flags change all of these). Measured end to end, each in a
fresh process and without a compilation cache, as a user would run them:

* ``sweep``: ``ppo-jax sweep SPEC --out DIR`` (one program per chunk size; one
  chunk when it fits in memory). Wall time of the process; compile and run
  seconds, env steps/s (run only) and XLA's memory estimate from its
  metadata.json; peak resident memory of the process.
* ``separate``: ``ppo-jax train`` once per (setting, seed), one after another,
  as users of the peers run sweeps. Each compiles its own program, so all 128
  take about 128x one; the script runs ``--separate-runs`` of them (different
  settings and seeds) and extrapolates their mean wall time to all runs, and
  says so in the table.

    python scripts/bench_sweep.py                                   # ~5 min on 2 CPU cores
    python scripts/bench_sweep.py --total-timesteps 500000 --separate-runs 128   # the full comparison
    python scripts/bench_sweep.py --seeds 8 --settings 128           # 1024 runs (a GPU)
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

CLIP_EPS = (0.1, 0.2, 0.3, 0.4)
ENT_COEF = (0.0, 0.003, 0.01, 0.03)


def settings(count: int) -> list[dict]:
    """``count`` (clip_eps, ent_coef) settings: the 4 x 4 grid, then log-spaced ent_coef beyond 16."""
    grid = [{"clip_eps": c, "ent_coef": e} for c, e in itertools.product(CLIP_EPS, ENT_COEF)]
    if count <= len(grid):
        return grid[:count]
    ent = [float(f"{x:.3g}") for x in np.geomspace(1e-4, 0.1, -(-count // len(CLIP_EPS)))]
    return [{"clip_eps": c, "ent_coef": e} for c, e in itertools.product(CLIP_EPS, ent)][:count]


def timed(command: list[str], env: dict, log: Path) -> dict:
    """Run ``command`` (output to ``log``): wall seconds and peak resident memory of that process (os.wait4)."""
    start = time.perf_counter()
    with open(log, "w") as f:
        proc = subprocess.Popen(command, stdout=f, stderr=subprocess.STDOUT, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise RuntimeError(f"{' '.join(command)} failed:\n{log.read_text()[-3000:]}")
    return {"wall_s": wall, "peak_rss_mib": usage.ru_maxrss / 1024}


def bench_sweep(work: Path, rows: list[dict], seeds: int, total: int, env: dict) -> dict:
    spec = {
        "name": "bench",
        "envs": ["CartPole-v1"],
        "seeds": seeds,
        "base": {"total_timesteps": total},
        "zip": {"clip_eps": [r["clip_eps"] for r in rows], "ent_coef": [r["ent_coef"] for r in rows]},
    }
    (work / "bench.yaml").write_text(json.dumps(spec))  # JSON is YAML
    out = work / "sweep"
    result = timed(
        [
            sys.executable,
            "-m",
            "ppo_jax.cli",
            "sweep",
            str(work / "bench.yaml"),
            "--out",
            str(out),
            "--cache-dir",
            "none",
        ],
        env,
        work / "sweep.log",
    )
    metadata = json.loads((out / "metadata.json").read_text())
    return {
        "case": "sweep",
        "runs": len(rows) * seeds,
        "measured_runs": len(rows) * seeds,
        **result,
        "compile_s": metadata["compile_seconds"],
        "run_s": metadata["run_seconds"],
        "env_steps": metadata["env_steps"],
        "env_steps_per_s": metadata["env_steps_per_second"],
        "chunks": len(metadata["chunks"]),
        "xla_memory_mib": metadata["chunks"][0]["memory_bytes"] / 2**20,
    }


def bench_separate(work: Path, rows: list[dict], seeds: int, total: int, measured: int, env: dict) -> dict:
    pairs = [(r, s) for r in rows for s in range(seeds)]
    picks = [pairs[i] for i in np.linspace(0, len(pairs) - 1, min(measured, len(pairs))).round().astype(int)]
    results, metas = [], []
    for i, (row, seed) in enumerate(picks):
        out = work / f"train{i}"
        command = [
            sys.executable,
            "-m",
            "ppo_jax.cli",
            "train",
            "--env",
            "CartPole-v1",
            "--total-timesteps",
            str(total),
            "--clip-eps",
            str(row["clip_eps"]),
            "--ent-coef",
            str(row["ent_coef"]),
            "--seed",
            str(seed),
            "--no-progress",
            "--out",
            str(out),
        ]
        results.append(timed(command, env, work / f"train{i}.log"))
        metas.append(json.loads((out / "metadata.json").read_text()))
        print(f"  separate run {i + 1}/{len(picks)}: {results[-1]['wall_s']:.1f} s", flush=True)
    mean_wall = float(np.mean([r["wall_s"] for r in results]))
    return {
        "case": "separate",
        "runs": len(pairs),
        "measured_runs": len(picks),
        "wall_s": mean_wall * len(pairs),
        "wall_s_measured": sum(r["wall_s"] for r in results),
        "peak_rss_mib": max(r["peak_rss_mib"] for r in results),
        "compile_s": float(np.mean([m["compile_seconds"] for m in metas])) * len(pairs),
        "run_s": float(np.mean([m["run_seconds"] for m in metas])) * len(pairs),
        "env_steps": int(np.mean([m["env_steps"] for m in metas])) * len(pairs),
        "env_steps_per_s": float(np.mean([m["env_steps_per_second"] for m in metas])),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--total-timesteps",
        type=int,
        default=100_000,
        help="env steps per run (default 100k; the issue's figure is 500k)",
    )
    parser.add_argument(
        "--settings", type=int, default=16, help="hyperparameter settings (default 16: 4 clip_eps x 4 ent_coef)"
    )
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument(
        "--separate-runs", type=int, default=4, help="ppo-jax train processes actually run (the rest extrapolated)"
    )
    parser.add_argument("--out", type=Path, default=Path("bench_results/bench_sweep.json"))
    args = parser.parse_args()

    env = {k: v for k, v in os.environ.items() if k not in ("JAX_COMPILATION_CACHE_DIR", "PPO_JAX_CACHE_DIR")}
    rows = settings(args.settings)
    with tempfile.TemporaryDirectory(prefix="bench_sweep_") as tmp:
        work = Path(tmp)
        print(f"sweep: {len(rows)} settings x {args.seeds} seeds x {args.total_timesteps:,} env steps ...", flush=True)
        sweep = bench_sweep(work, rows, args.seeds, args.total_timesteps, env)
        print(f"separate ppo-jax train processes: {args.separate_runs} of {sweep['runs']} ...", flush=True)
        separate = bench_separate(work, rows, args.seeds, args.total_timesteps, args.separate_runs, env)

    header = (
        f"{'case':<34} {'runs':>5} {'wall s':>8} {'compile s':>9} {'run s':>8} {'env steps/s':>12} {'peak RSS MiB':>12}"
    )
    print("\n" + header + "\n" + "-" * len(header))
    for row in (sweep, separate):
        label = (
            "sweep: one program"
            if row["case"] == "sweep"
            else (
                f"separate: {row['measured_runs']} measured, x{row['runs'] / row['measured_runs']:.0f}"
                if row["measured_runs"] < row["runs"]
                else "separate ppo-jax train processes"
            )
        )
        print(
            f"{label:<34} {row['runs']:>5} {row['wall_s']:>8.1f} {row['compile_s']:>9.1f} {row['run_s']:>8.1f} "
            f"{row['env_steps_per_s']:>12,.0f} {row['peak_rss_mib']:>12,.0f}"
        )
    speedup = separate["wall_s"] / sweep["wall_s"]
    ratio = sweep["env_steps_per_s"] / separate["env_steps_per_s"]
    print(
        f"\nend to end: the sweep is {speedup:.1f}x faster; its env steps/s are {ratio:.1f}x a single run's "
        f"(XLA memory estimate of its chunk: {sweep['xla_memory_mib']:.1f} MiB, {sweep['chunks']} chunk(s))"
    )

    from ppo_jax.storage.provenance import collect_metadata

    result = {
        "sweep": sweep,
        "separate": separate,
        "speedup_end_to_end": speedup,
        "env_steps_per_s_ratio": ratio,
        "settings": rows,
        "seeds": args.seeds,
        "total_timesteps": args.total_timesteps,
        "metadata": collect_metadata(["python", "scripts/bench_sweep.py", *sys.argv[1:]]),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
