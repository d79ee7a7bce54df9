"""Throughput on a Brax task: each physics backend, rollout only and full PPO, beside Brax's own PPO.

Prints a table and writes JSON (with provenance). For each (backend, num_envs):

* ``rollout``: ``ppo_jax.rl.rollout.rollout`` alone (policy forward, env step, auto-reset; no update),
  ``--rollout-steps`` steps per env;
* ``ppo``: ``--updates`` updates of ``ppo_jax.rl.train`` (``num_envs x 80`` steps each, 4 epochs
  of 4 minibatches), initialization apart, as Brax times its own;
* ``brax_ppo`` (with ``--against-brax``): ``brax.training.agents.ppo.train`` on the same env,
  backend and work -- unroll 20, batch_size = num_envs, 4 minibatches, 4 epochs, so one
  update is the same ``num_envs x 80`` env steps -- its own ``training/sps`` of each training
  epoch of ``--updates`` updates after the first two (which compile), no evaluation.

Each case is timed ``--repeats`` times after a warm-up (ours: the compiled program run again; Brax's:
that many more training epochs) and reports the minimum run seconds (``run_s``), the median
(``run_s_median``) and every timing; ours and Brax's run back to back for each size, not alternated.

Both PPOs use Brax PPO's networks and settings (``--preset brax``'s: tanh-squashed
Gaussian, 4x32 policy, 5x256 value, swish, observation normalization). Compile
seconds are ahead of time for ours; Brax's PPO compiles inside its first epoch.

    python scripts/bench_brax.py                                   # halfcheetah, 4 backends, 16/128/1024 envs
    python scripts/bench_brax.py --task inverted_pendulum --backends spring --envs 16 --against-brax
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
from jax import lax

from ppo_jax import PPOConfig
from ppo_jax.rl.brax_envs import BACKENDS, import_brax_envs
from ppo_jax.rl.envs import env_spec
from ppo_jax.rl.presets import BRAX_COMMON
from ppo_jax.rl.rollout import rollout
from ppo_jax.rl.train import init, step
from ppo_jax.storage.provenance import collect_metadata

UNROLL, MINIBATCHES, EPOCHS = 20, 4, 4
NUM_STEPS = (
    UNROLL * MINIBATCHES
)  # Brax: batch_size * num_minibatches * unroll_length / num_envs with batch_size = num_envs


def our_config(task: str, backend: str, num_envs: int, updates: int) -> PPOConfig:
    """Brax PPO's networks and loss settings (``--preset brax``'s), on this benchmark's work and schedule."""
    return PPOConfig(
        **BRAX_COMMON,
        env=f"brax/{task}",
        brax_backend=backend,
        num_envs=num_envs,
        num_steps=NUM_STEPS,
        total_timesteps=num_envs * NUM_STEPS * updates,
        num_minibatches=MINIBATCHES,
        update_epochs=EPOCHS,
        ent_coef=1e-3,
        gamma=0.97,
    )


def _compiled(fn, repeats: int, *args) -> tuple[float, list[float]]:
    """Compile seconds (ahead of time) and the seconds of ``repeats`` timed runs after a warm-up run."""
    start = time.perf_counter()
    compiled = jax.jit(fn).lower(*args).compile()
    compile_s = time.perf_counter() - start
    jax.block_until_ready(compiled(*args))  # warm
    timings = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(compiled(*args))
        timings.append(time.perf_counter() - start)
    return compile_s, timings


def _timed(env_steps: int, timings: list[float]) -> dict:
    """The row's run seconds: minimum (``run_s``, and the env steps/s from it), median and all of them."""
    best = min(timings)
    return {
        "run_s": round(best, 3),
        "run_s_median": round(statistics.median(timings), 3),
        "run_s_all": [round(t, 3) for t in timings],
        "env_steps": env_steps,
        "env_steps_per_s": round(env_steps / best),
    }


def measure_rollout(task: str, backend: str, num_envs: int, steps: int, repeats: int) -> dict:
    cfg = our_config(task, backend, num_envs, 1).replace(
        num_steps=steps, total_timesteps=num_envs * steps, num_minibatches=1
    )
    spec = env_spec(cfg)

    runner = jax.jit(lambda key: init(cfg, key))(jax.random.key(0))

    def run(runner):  # the observations: a constant reward (inverted_pendulum's) would let XLA drop the physics
        return rollout(runner, cfg, spec)[1].next_obs.sum()

    compile_s, timings = _compiled(run, repeats, runner)
    return {"mode": "rollout", "compile_s": round(compile_s, 2), **_timed(num_envs * steps, timings)}


def measure_ppo(task: str, backend: str, num_envs: int, updates: int, repeats: int) -> dict:
    cfg = our_config(task, backend, num_envs, updates)
    runner = jax.jit(lambda key: init(cfg, key))(jax.random.key(0))

    def run(runner):  # the updates alone, as Brax times them (initialization apart)
        return lax.scan(lambda r, u: step(cfg, r, u), runner, jnp.arange(cfg.num_updates))[1]["loss"]

    compile_s, timings = _compiled(run, repeats, runner)
    return {"mode": "ppo", "compile_s": round(compile_s, 2), **_timed(cfg.num_updates * cfg.batch_size, timings)}


def _removed(module, name: str) -> bool:
    try:
        getattr(module, name)
    except AttributeError:
        return True
    return False


def measure_brax_ppo(task: str, backend: str, num_envs: int, updates: int, repeats: int) -> dict:
    """Brax's PPO on the same work; its own timing of ``repeats`` training epochs after the two that compile."""
    from brax.training.agents.ppo import train as brax_ppo

    if not hasattr(jax, "device_put_replicated") or _removed(jax, "device_put_replicated"):
        # Brax 0.14.2's PPO calls jax.device_put_replicated, removed in jax 0.10: the drop-in replacement of
        # https://docs.jax.dev/en/latest/migrate_pmap.html, a leading device axis.
        jax.device_put_replicated = lambda x, devices: jax.device_put(
            jax.tree.map(lambda a: jnp.stack([a] * len(devices)), x), devices[0] if len(devices) == 1 else None
        )

    envs = import_brax_envs()
    env = envs.get_environment(task, backend=backend)
    sps = []
    epochs = 2 + repeats
    start = time.perf_counter()
    brax_ppo.train(
        environment=env,
        num_timesteps=epochs * updates * num_envs * NUM_STEPS,
        num_evals=epochs + 1,
        run_evals=False,
        episode_length=1000,
        num_envs=num_envs,
        batch_size=num_envs,
        num_minibatches=MINIBATCHES,
        unroll_length=UNROLL,
        num_updates_per_batch=EPOCHS,
        normalize_observations=True,
        learning_rate=3e-4,
        entropy_cost=1e-3,
        discounting=0.97,
        clipping_epsilon=0.3,
        seed=0,
        progress_fn=lambda step, metrics: sps.append(float(metrics.get("training/sps", float("nan")))),
    )
    total_s = time.perf_counter() - start
    steps = updates * num_envs * NUM_STEPS
    clean = sps[-repeats:]  # epochs 1 and 2 compile (the second again: its inputs come back with another sharding)
    return {
        "mode": "brax_ppo",
        "compile_s": None,
        "total_s": round(total_s, 2),
        **_timed(steps, [steps / rate for rate in clean]),
        "sps_per_epoch": [round(s) for s in sps],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="halfcheetah")
    parser.add_argument("--backends", nargs="+", default=list(BACKENDS), choices=BACKENDS)
    parser.add_argument("--envs", nargs="+", type=int, default=[16, 128, 1024])
    parser.add_argument("--rollout-steps", type=int, default=200, help="steps per env of the rollout-only case")
    parser.add_argument("--updates", type=int, default=2, help="PPO updates per timed run (after a warm-up run)")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per case; the minimum is reported")
    parser.add_argument("--modes", nargs="+", default=["rollout", "ppo"], choices=["rollout", "ppo"])
    parser.add_argument("--against-brax", action="store_true", help="also Brax's own PPO on the same work")
    parser.add_argument("--out", type=Path, default=Path("bench_results/brax.json"))
    args = parser.parse_args()

    header = f"{'task':<18} {'backend':<11} {'envs':>5} {'mode':<9} {'env steps':>9} {'compile s':>9} {'run s':>7} {'env steps/s':>11}"
    print(header)
    print("-" * len(header))
    rows = []
    for backend in args.backends:
        for num_envs in args.envs:
            cases = (
                [
                    lambda backend=backend, num_envs=num_envs: measure_rollout(
                        args.task, backend, num_envs, args.rollout_steps, args.repeats
                    )
                ]
                if "rollout" in args.modes
                else []
            )
            if "ppo" in args.modes:
                cases.append(
                    lambda backend=backend, num_envs=num_envs: measure_ppo(
                        args.task, backend, num_envs, args.updates, args.repeats
                    )
                )
            if args.against_brax:
                cases.append(
                    lambda backend=backend, num_envs=num_envs: measure_brax_ppo(
                        args.task, backend, num_envs, args.updates, args.repeats
                    )
                )
            for case in cases:
                row = {"task": args.task, "backend": backend, "num_envs": num_envs, **case()}
                rows.append(row)
                compile_s = "-" if row["compile_s"] is None else f"{row['compile_s']:.1f}"
                print(
                    f"{args.task:<18} {backend:<11} {num_envs:>5} {row['mode']:<9} {row['env_steps']:>9,} "
                    f"{compile_s:>9} {row['run_s']:>7.2f} {row['env_steps_per_s']:>11,}",
                    flush=True,
                )
    metadata = collect_metadata(["python", "scripts/bench_brax.py", *sys.argv[1:]])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {"results": rows, "metadata": metadata, "machine": platform.platform(), "backend": jax.default_backend()},
            indent=2,
        )
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
