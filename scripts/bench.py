"""Throughput benchmark of ppo_jax.rl.train on CartPole-v1 with the standard config (and Pendulum-v1).

Prints a table and writes JSON. For each case: compile seconds (ahead of time,
``jax.jit(f).lower(...).compile()``), run seconds (minimum over --repeats timed
runs after compiling) and env steps per second (all seeds together).

Cases: 1, 16 and 64 seeds vmapped (num_envs 4), 1 seed at num_envs 256; 1 and 16
seeds with the ``on_update`` progress callback in the program as ``ppo-jax train``
puts it there (every 5% of the updates; the reporter shows nothing, as under
``--no-progress``) and, for comparison, after every update (``callback*``); and
the rollout alone (env + policy forward, no update) as the ceiling. ``sweep16`` and
``sweep64`` run the same work through ``ppo_jax.sweep.run`` (what ``ppo-jax sweep``
does: one program over the 16/64 pairs with their configs stacked, plus each run's
evaluation episodes) and report the env steps/s the sweep records (chunk run seconds).
``vmap1`` trains one seed under ``jax.vmap`` (a batch axis of one, as ppo_jax did before
``ppo_jax.vmap_runs``) against ``seeds1``'s unbatched run; ``pendulum1`` and ``pendulum_vmap1`` do the
same on Pendulum-v1 with PureJaxRL's continuous-control settings (``PENDULUM``: 256 x 256 networks).
Name cases twice to alternate them:

    python scripts/bench.py                        # all cases
    python scripts/bench.py --cases seeds1 rollout --total-timesteps 500000
    python scripts/bench.py --cases seeds16 sweep16 seeds16 sweep16 --repeats 3
    python scripts/bench.py --cases pendulum1 pendulum_vmap1 pendulum1 pendulum_vmap1 --repeats 3

Against a peer, side by side in one process (``scripts/bench_against.py``):

    python scripts/bench.py --against purejaxrl --peer-path ~/src/purejaxrl    # CartPole, Pendulum, CartPole-GRU; 1/16/64 seeds
    python scripts/bench.py --against purejaxrl --peer-path ~/src/purejaxrl --envs CartPole-v1 --seeds 1 --repeats 10
    python scripts/bench.py --against purejaxrl --peer-path ~/src/purejaxrl --envs CartPole-v1 Pendulum-v1 --seeds 1 --num-envs 2048

``--chunk-size auto`` against fixed chunk sizes, whole sweeps alternated (``scripts/bench_chunks.py``):

    python scripts/bench.py --chunking pendulum64 cartpole64 brax64 --rounds 2
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

import bench_against  # scripts/bench_against.py
import bench_chunks  # scripts/bench_chunks.py
import jax
from jax import lax

from ppo_jax import PPOConfig
from ppo_jax.progress import ProgressReporter
from ppo_jax.rl.envs import make_env
from ppo_jax.rl.rollout import rollout
from ppo_jax.rl.train import init, train
from ppo_jax.storage.provenance import collect_metadata
from ppo_jax.vmap_runs import vmap_runs

PENDULUM = {  # PureJaxRL's ppo_continuous_action.py settings, as in bench_against's Pendulum rows
    "env": "Pendulum-v1",
    "num_envs": 8,
    "num_steps": 256,
    "num_minibatches": 32,
    "update_epochs": 10,
    "hidden_sizes": (256, 256),
    "lr": 1e-3,
    "ent_coef": 0.0,
    "normalize_obs": True,
    "normalize_reward": True,
}
CASES = {
    # name: (seeds, config overrides, mode: None, a progress callback ("cli": every 5% of updates, "every"
    # update), "sweep" (through ppo_jax.sweep.run) or "vmap" (jax.vmap over the seeds even for one seed))
    "seeds1": (1, {}, None),
    "seeds16": (16, {}, None),
    "seeds64": (64, {}, None),
    "envs256": (1, {"num_envs": 256}, None),
    "progress1": (1, {}, "cli"),
    "progress16": (16, {}, "cli"),
    "callback1": (1, {}, "every"),
    "callback16": (16, {}, "every"),
    "rollout": (1, {}, None),
    "sweep16": (16, {}, "sweep"),
    "sweep64": (64, {}, "sweep"),
    "vmap1": (1, {}, "vmap"),
    "pendulum1": (1, PENDULUM, None),
    "pendulum_vmap1": (1, PENDULUM, "vmap"),
}


def rollout_only(cfg: PPOConfig, key: jax.Array) -> jax.Array:
    """num_updates rollouts with the initial policy and no update: the env + forward ceiling."""
    spec = make_env(cfg.env)

    def body(runner, _):
        runner, traj = rollout(runner, cfg, spec)
        return runner, traj.reward.mean()

    return lax.scan(body, init(cfg, key), None, length=cfg.num_updates)[1]


def measure(name: str, total_timesteps: int, repeats: int) -> dict:
    seeds, overrides, progress = CASES[name]
    cfg = PPOConfig(**{"env": "CartPole-v1", **overrides})
    # At least 30 updates per run, so that large batches are not measured on 2 updates.
    cfg = cfg.replace(total_timesteps=max(total_timesteps, 30 * cfg.batch_size))
    if progress == "sweep":
        return measure_sweep(name, cfg, seeds, repeats)
    reporter = ProgressReporter(cfg.num_updates, cfg.batch_size, seeds, score="episode_return", enabled=False)
    if name == "rollout":
        fn = rollout_only
    else:
        every = max(1, cfg.num_updates // 20) if progress == "cli" else 1
        callback = reporter if progress in ("cli", "every") else None

        def fn(cfg, key):
            return train(cfg, key, on_update=callback, report_every=every)

    # As ppo-jax train: one seed unbatched; "vmap" keeps jax.vmap's batch axis of one (what ppo_jax did before).
    fn = jax.vmap(fn, in_axes=(None, 0)) if progress == "vmap" else vmap_runs(fn, in_axes=(None, 0))
    keys = jax.random.split(jax.random.key(0), seeds)

    start = time.perf_counter()
    compiled = jax.jit(fn).lower(cfg, keys).compile()
    compile_s = time.perf_counter() - start
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(compiled(cfg, keys))
        times.append(time.perf_counter() - start)
    env_steps = seeds * cfg.num_updates * cfg.batch_size
    return {
        "case": name,
        "env": cfg.env,
        "seeds": seeds,
        "num_envs": cfg.num_envs,
        "num_steps": cfg.num_steps,
        "env_steps_per_seed": cfg.num_updates * cfg.batch_size,
        "compile_s": round(compile_s, 3),
        "run_s": round(min(times), 3),
        "run_s_all": [round(t, 3) for t in times],
        "env_steps_per_s": round(env_steps / min(times)),
    }


def measure_sweep(name: str, cfg: PPOConfig, seeds: int, repeats: int) -> dict:
    """``repeats`` sweeps, each into a temporary directory and compiled anew (no persistent cache):
    the env steps/s the sweep itself records, from its fastest repeat."""
    from ppo_jax import sweep

    spec = {"base": {"env": cfg.env, "total_timesteps": cfg.total_timesteps}, "seeds": seeds}
    infos = []
    with tempfile.TemporaryDirectory() as tmp:
        for repeat in range(repeats):
            out = Path(tmp) / f"sweep{repeat}"
            sweep.run(spec, out=out, cache_dir=None, progress=False, command=["bench.py", name])
            infos.append(json.loads((out / "metadata.json").read_text()))
    times = [info["run_seconds"] for info in infos]
    env_steps = infos[0]["env_steps"]
    return {
        "case": name,
        "seeds": seeds,
        "num_envs": cfg.num_envs,
        "num_steps": cfg.num_steps,
        "env_steps_per_seed": env_steps // seeds,
        "compile_s": round(min(info["compile_seconds"] for info in infos), 3),
        "run_s": round(min(times), 3),
        "run_s_all": [round(t, 3) for t in times],
        "env_steps_per_s": round(env_steps / min(times)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", nargs="+", choices=list(CASES), default=list(CASES))
    parser.add_argument(
        "--total-timesteps",
        type=int,
        default=None,
        help="env steps per seed (default 100k; with --against: 100k CartPole and CartPole-GRU, 40,960 Pendulum, "
        "scaled with --num-envs)",
    )
    parser.add_argument("--repeats", type=int, default=2, help="timed runs per case; the minimum is reported")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="JSON file (default bench_results/bench.json, or bench_results/against_purejaxrl.json with --against)",
    )
    parser.add_argument(
        "--against",
        choices=["purejaxrl"],
        default=None,
        help="run a peer's PPO beside ours on the same work, alternating (scripts/bench_against.py)",
    )
    parser.add_argument("--peer-path", type=Path, default=None, help="a local checkout of the peer (with --against)")
    parser.add_argument(
        "--envs",
        nargs="+",
        default=list(bench_against.ROWS),
        choices=list(bench_against.ROWS),
        help="with --against: the rows (default all: CartPole, Pendulum, and CartPole-GRU, recurrent, vs ppo_rnn.py)",
    )
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 16, 64], help="with --against: seed counts")
    parser.add_argument(
        "--num-envs",
        type=int,
        default=None,
        help="with --against: every row's env count, on both sides (default: the row's own, CartPole 4, Pendulum 8); "
        "the default steps per seed scale with it, so each row keeps its number of updates",
    )
    parser.add_argument(
        "--row-timeout",
        type=float,
        default=bench_against.ROW_TIMEOUT,
        help="with --against: seconds per row before it is reported as hung",
    )
    parser.add_argument(
        "--chunking",
        nargs="+",
        choices=list(bench_chunks.CASES),
        default=None,
        help="sweeps of 64 pairs with --chunk-size auto beside fixed sizes, alternated (scripts/bench_chunks.py)",
    )
    parser.add_argument(
        "--variants",
        nargs="+",
        default=list(bench_chunks.VARIANTS),
        help="with --chunking: the --chunk-size values (default auto 64 32 16)",
    )
    parser.add_argument("--rounds", type=int, default=2, help="with --chunking: rounds of every variant")
    parser.add_argument(
        "--train", action="store_true", help="with --chunking: ppo-jax train --seeds 64 of the case, not the sweep"
    )
    args = parser.parse_args()
    if args.chunking:
        results = bench_chunks.run(args.chunking, args.variants, args.rounds, args.total_timesteps, args.train)
        write(results, args.out or Path("bench_results/chunking.json"))
        return
    if args.against:
        if args.peer_path is None:
            parser.error(
                "--against needs --peer-path, a local checkout (git clone https://github.com/luchris429/purejaxrl)"
            )
        if args.num_envs is not None and args.num_envs < 1:
            parser.error(f"--num-envs must be a positive integer, got {args.num_envs}")
        rows = bench_against.run(
            args.peer_path, args.envs, args.seeds, args.total_timesteps, args.repeats, args.row_timeout, args.num_envs
        )
        write(rows, args.out or Path(f"bench_results/against_{args.against}.json"))
        return

    rows = []
    header = (
        f"{'case':<14} {'seeds':>5} {'envs':>5} {'steps/seed':>10} {'compile s':>9} {'run s':>7} {'env steps/s':>12}"
    )
    print(header)
    print("-" * len(header))
    for name in args.cases:
        row = measure(name, args.total_timesteps or 100_000, args.repeats)
        rows.append(row)
        print(
            f"{row['case']:<14} {row['seeds']:>5} {row['num_envs']:>5} {row['env_steps_per_seed']:>10,} "
            f"{row['compile_s']:>9.2f} {row['run_s']:>7.2f} {row['env_steps_per_s']:>12,}",
            flush=True,
        )
    write(rows, args.out or Path("bench_results/bench.json"))


def write(rows: list[dict], out: Path) -> None:
    """The rows as JSON with the run's provenance (command, commit, versions, hardware)."""
    metadata = collect_metadata(["python", "scripts/bench.py", *sys.argv[1:]])
    result = {"results": rows, "metadata": metadata, "machine": platform.platform(), "backend": jax.default_backend()}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
