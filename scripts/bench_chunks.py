"""``--chunk-size auto`` beside fixed chunk sizes, end to end, alternating: ``bench.py --chunking``.

Each case is one sweep of 64 (setting, seed) pairs (4 clip_eps x 16 seeds) that fits memory as one
chunk, so the planner's default is 64 and auto's candidates are 64, 32 and 16
(``ppo_jax.sweep.calibrate``). Each variant -- ``auto`` and each fixed size -- is the same
``ppo-jax sweep SPEC --out DIR --chunk-size V --cache-dir none`` in a fresh process, as a user
runs it; the variants run in turn, their order reversed every round (A B C C B A ...), so that a
machine whose speed drifts slows all alike. Reported per variant: wall seconds of the whole process
(compiles and auto's calibration included) in each round, their median, the end-to-end env steps/s
(env steps / median wall), the ratio to the best fixed size's, and for auto the sizes it chose with
its probes' rates and seconds (from plan.json).

Cases (``--total-timesteps`` scales every case's budget per run):

* ``pendulum64``: Pendulum-v1, the settings of PureJaxRL's ppo_continuous_action.py (8 envs x 256
  steps, 32 minibatches x 10 epochs, tanh 256 x 256, observation and reward normalization), 163,840 env
  steps per run (80 updates): 9-18 minutes a sweep on 2 CPU cores, by VM (docs/benchmarks/chunking.md).
* ``cartpole64``: CartPole-v1, the standard config (4 envs x 128 steps, 64 x 64), 2M env steps per run.
* ``brax64``: brax/inverted_double_pendulum on spring physics, the mujoco preset's network
  (64 x 64, 1 env x 2048 steps, 32 minibatches x 10 epochs), 204,800 env steps per run (100 updates).

``--train``: the case's base config (clip_eps at its default) as one ``ppo-jax train --seeds 64 --chunk-size
V`` instead of the sweep: the seeds a chunk at a time (``ppo_jax.seed_chunks``); variant 64 is all seeds in
one call, the default.

Calibration is bounded by its share of the estimated run time (5% by default) and skipped for groups that
run under 10 minutes, so cases cut to a small ``--total-timesteps`` measure auto as the memory-fit size.

    python scripts/bench.py --chunking pendulum64                           # one case, 2 rounds (~2.4 h on 2 cores)
    python scripts/bench.py --chunking pendulum64 cartpole64 brax64 --rounds 2   # all (a GPU: minutes)
    python scripts/bench.py --chunking cartpole64 --total-timesteps 20000 --rounds 1 --variants auto 16   # smoke
    python scripts/bench.py --chunking pendulum64 --train --rounds 1 --variants auto 64 16   # ppo-jax train --seeds 64
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CLIP_EPS = [0.1, 0.2, 0.3, 0.4]
SEEDS = 16
VARIANTS = ("auto", "64", "32", "16")
CASES = {
    "pendulum64": {
        "env": "Pendulum-v1",
        "total_timesteps": 163_840,
        "num_envs": 8,
        "num_steps": 256,
        "num_minibatches": 32,
        "update_epochs": 10,
        "hidden_sizes": [256, 256],
        "lr": 1.0e-3,
        "ent_coef": 0.0,
        "normalize_obs": True,
        "normalize_reward": True,
    },
    "cartpole64": {"env": "CartPole-v1", "total_timesteps": 2_000_000},
    "brax64": {
        "env": "brax/inverted_double_pendulum",
        "brax_backend": "spring",
        "total_timesteps": 204_800,
        "num_envs": 1,
        "num_steps": 2048,
        "num_minibatches": 32,
        "update_epochs": 10,
        "lr": 3.0e-4,
        "ent_coef": 0.0,
        "action_dist": "gaussian",
        "normalize_obs": True,
        "normalize_reward": True,
    },
}


def spec_of(case: str, total_timesteps: int | None) -> dict:
    """The case's sweep spec: its base config, ``clip_eps`` over ``CLIP_EPS``, ``SEEDS`` seeds."""
    base = dict(CASES[case])
    env = base.pop("env")
    if total_timesteps is not None:
        base["total_timesteps"] = total_timesteps
    return {"name": f"bench_{case}", "envs": [env], "seeds": SEEDS, "base": base, "grid": {"clip_eps": CLIP_EPS}}


def train_command(case: str, total_timesteps: int | None, out: Path, variant: str) -> list[str]:
    """``ppo-jax train`` of the case's base config (clip_eps at its default), 64 seeds, ``--chunk-size variant``."""
    base = dict(CASES[case])
    if total_timesteps is not None:
        base["total_timesteps"] = total_timesteps
    command = [sys.executable, "-m", "ppo_jax.cli", "train", "--seeds", str(SEEDS * len(CLIP_EPS))]
    for name, value in base.items():
        flag = "--" + name.replace("_", "-")
        if isinstance(value, bool):
            command.append(flag if value else "--no-" + name.replace("_", "-"))
        elif isinstance(value, list):
            command += [flag, *map(str, value)]
        else:
            command += [flag, str(value)]
    return command + ["--chunk-size", variant, "--out", str(out), "--no-progress"]


def run_train_variant(command: list[str], env: dict) -> dict:
    """One ``ppo-jax train`` process: its wall time, and what metadata.json records."""
    start = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    if proc.returncode:
        raise RuntimeError(f"{' '.join(command)} failed:\n{proc.stderr[-3000:]}")
    metadata = json.loads((Path(command[command.index("--out") + 1]) / "metadata.json").read_text())
    return {
        "wall_s": wall,
        "env_steps": metadata["env_steps"],
        "run_s": metadata["run_seconds"],
        "compile_s": metadata["compile_seconds"],
        "chunk_sizes": [metadata["run"]["chunk_size"]],
        "calibration": metadata.get("seed_chunks", {}),
    }


def run_variant(spec_path: Path, out: Path, variant: str, env: dict) -> dict:
    """One ``ppo-jax sweep`` process with ``--chunk-size variant``: its wall time, and what its files record."""
    command = [sys.executable, "-m", "ppo_jax.cli", "sweep", str(spec_path), "--out", str(out)]
    command += ["--chunk-size", variant, "--cache-dir", "none"]
    start = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    if proc.returncode:
        raise RuntimeError(f"{' '.join(command)} failed:\n{proc.stderr[-3000:]}")
    metadata = json.loads((out / "metadata.json").read_text())
    plan = json.loads((out / "plan.json").read_text())
    return {
        "wall_s": wall,
        "env_steps": metadata["env_steps"],
        "run_s": metadata["run_seconds"],
        "compile_s": metadata["compile_seconds"],
        "chunk_sizes": plan["chunk_sizes"],
        "calibration": plan.get("calibration", {}),
    }


def bench_case(case: str, variants: list[str], rounds: int, total_timesteps: int | None, train: bool = False) -> dict:
    """Every variant ``rounds`` times, the order reversed each round; a summary row per variant.

    ``train``: ``ppo-jax train --seeds 64`` of the case's base config instead of the sweep (``train_command``)."""
    env = {k: v for k, v in os.environ.items() if k not in ("JAX_COMPILATION_CACHE_DIR", "PPO_JAX_CACHE_DIR")}
    runs: dict[str, list[dict]] = {v: [] for v in variants}
    with tempfile.TemporaryDirectory(prefix=f"bench_chunks_{case}_") as tmp:
        spec_path = Path(tmp) / "spec.yaml"
        spec_path.write_text(json.dumps(spec_of(case, total_timesteps)))  # JSON is YAML
        for r in range(rounds):
            for variant in variants if r % 2 == 0 else variants[::-1]:
                out = Path(tmp) / f"{variant}_{r}"
                if train:
                    result = run_train_variant(train_command(case, total_timesteps, out, variant), env)
                else:
                    result = run_variant(spec_path, out, variant, env)
                runs[variant].append(result)
                print(f"  {case} round {r + 1}: --chunk-size {variant}: {result['wall_s']:.1f} s", flush=True)
    rows = []
    for variant, results in runs.items():
        wall = statistics.median(r["wall_s"] for r in results)
        rows.append(
            {
                "case": case,
                "variant": variant,
                "wall_s_rounds": [round(r["wall_s"], 1) for r in results],
                "run_s_rounds": [round(r["run_s"], 1) for r in results],  # the runs alone (metadata.json)
                "compile_s_rounds": [round(r["compile_s"], 1) for r in results],
                "wall_s": round(wall, 1),
                "env_steps_per_s": round(results[0]["env_steps"] / wall),
                "chunk_sizes": [r["chunk_sizes"] for r in results],
                "calibration": [r["calibration"] for r in results] if variant == "auto" else None,
            }
        )
    fixed = [row for row in rows if row["variant"] != "auto"]
    best = max(fixed, key=lambda row: row["env_steps_per_s"]) if fixed else None
    for row in rows:
        row["vs_best_fixed"] = round(row["env_steps_per_s"] / best["env_steps_per_s"], 3) if best else None
    what = {"train": train_command(case, total_timesteps, Path("OUT"), "V")[2:]} if train else {}
    return {"case": case, **(what or {"spec": spec_of(case, total_timesteps)}), "rows": rows}


def run(
    cases: list[str], variants: list[str], rounds: int, total_timesteps: int | None, train: bool = False
) -> list[dict]:
    """Bench every case; print its table as it finishes."""
    results = []
    for case in cases:
        print(f"{case}{' (train)' if train else ''}: {len(variants)} variants x {rounds} round(s) ...", flush=True)
        result = bench_case(case, variants, rounds, total_timesteps, train)
        results.append(result)
        header = (
            f"{'case':<11} {'chunk size':>10} {'wall s (rounds)':>24} {'median':>8} {'env steps/s':>12} {'vs best':>8}"
        )
        print("\n" + header + "\n" + "-" * len(header))
        for row in result["rows"]:
            chosen = f" (chose {row['chunk_sizes'][0]})" if row["variant"] == "auto" else ""
            rounds_text = ", ".join(f"{w:.0f}" for w in row["wall_s_rounds"])
            print(
                f"{case:<11} {row['variant']:>10} {rounds_text:>24} {row['wall_s']:>8.1f} "
                f"{row['env_steps_per_s']:>12,} {row['vs_best_fixed'] or float('nan'):>8.3f}{chosen}",
                flush=True,
            )
    return results
