"""ppo_jax beside PureJaxRL on the same work, alternating A B A B: ``bench.py --against purejaxrl``.

For each env and seed count (a row, run in a fresh process: ``run_row``), both programs (``jax.vmap`` over seeds of one
training run, PureJaxRL's ``make_train(config)`` from a local checkout and our
``train(cfg, key)``; one seed unbatched, as ``ppo-jax train --seeds 1`` and PureJaxRL's
``__main__`` run it: ``ppo_jax.vmap_runs``) are compiled ahead of time, then run in turn ``repeats``
times, the order swapped every round, so that a machine whose speed drifts
slows both alike. Reported per side: compile seconds (the minimum of
``COMPILE_ROUNDS`` alternating compiles, each after ``jax.clear_caches()``), run seconds (min and
median), env steps/s (from the min) and final return (mean over seeds of the
episodes finished in the last 5% of updates); and the ratios ours / peer. Rows with more
than one seed run both programs under the XLA flag PureJaxRL's batched QR needs, and time
ours once more without it, as ppo_jax runs (``run_row``).

The configs are the same work: CartPole-v1 with PureJaxRL's ppo.py config (4 envs
x 128 steps, 4 minibatches x 4 epochs, lr 2.5e-4 annealed, tanh 64x64); Pendulum-v1
with ppo_continuous_action.py's network (tanh 256x256) and CleanRL's
continuous-control schedule (8 envs x 256 steps, 32 minibatches x 10 epochs, lr 1e-3
annealed, observation and reward normalization). Ours keeps every default
(truncation bootstrapped from the final observation, the per-update metrics, the
exact KL after each update); PureJaxRL treats a time limit as termination and
reports no loss metrics.

``--num-envs N`` (``bench.py``) sets every row's env count on both sides, all else equal; the default
steps per seed then scale with it, so a row keeps its number of updates (and its learning-rate schedule).

The recurrent row, ``CartPole-GRU``: PureJaxRL's ``ppo_rnn.py`` (CartPole-v1, its ``__main__`` config: the ppo.py
schedule above; Dense 128 relu, a GRU of 128 shared by actor and critic, then a Dense 128 relu layer in each
head) beside ours with ``network: gru``, ``shared_torso``, ``hidden_sizes (128,)``, relu, ``rnn_hidden_size 128``,
``head_hidden_sizes (128,)``: the same layers (our hidden kernels' orthogonal gain is sqrt 2, the peer's heads' 2). Both reset the GRU state at every
episode start and update on whole env sequences; ours also bootstraps truncations with V(final observation).
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

import jax
import numpy as np

from ppo_jax import PPOConfig
from ppo_jax.rl.train import train
from ppo_jax.vmap_runs import vmap_runs

PEER_SCRIPTS = {"CartPole-v1": "ppo.py", "Pendulum-v1": "ppo_continuous_action.py", "CartPole-GRU": "ppo_rnn.py"}
ROWS = tuple(PEER_SCRIPTS)
"""The rows' names: the env, or CartPole-GRU for the recurrent row (on CartPole-v1)."""
SCHEDULER_FLAG = "--xla_cpu_enable_concurrency_optimized_scheduler=false"
ROW_TIMEOUT = 1800.0  # seconds per row before it is reported as hung
COMPILE_ROUNDS = 3  # compiles per side, alternating; the minimum is reported
DEFAULT_STEPS = {"CartPole-v1": 100_000, "Pendulum-v1": 40_960, "CartPole-GRU": 100_000}  # per seed

_CARTPOLE = {
    "LR": 2.5e-4,
    "NUM_ENVS": 4,
    "NUM_STEPS": 128,
    "UPDATE_EPOCHS": 4,
    "NUM_MINIBATCHES": 4,
    "ENT_COEF": 0.01,
    "ACTIVATION": "tanh",
    "ANNEAL_LR": True,
}
_PENDULUM = {
    "LR": 1e-3,
    "NUM_ENVS": 8,
    "NUM_STEPS": 256,
    "UPDATE_EPOCHS": 10,
    "NUM_MINIBATCHES": 32,
    "ENT_COEF": 0.0,
    "ACTIVATION": "tanh",
    "ANNEAL_LR": True,
    "NORMALIZE_ENV": True,
}
_COMMON = {"GAMMA": 0.99, "GAE_LAMBDA": 0.95, "CLIP_EPS": 0.2, "VF_COEF": 0.5, "MAX_GRAD_NORM": 0.5, "DEBUG": False}


def default_num_envs(row: str) -> int:
    """The row's own env count (PureJaxRL's script's: CartPole 4, Pendulum 8)."""
    return (_PENDULUM if row == "Pendulum-v1" else _CARTPOLE)["NUM_ENVS"]


def default_steps(row: str, num_envs: int | None = None) -> int:
    """Env steps per seed: ``DEFAULT_STEPS``, scaled to ``num_envs`` envs so the row keeps its number of updates."""
    return DEFAULT_STEPS[row] * (num_envs or default_num_envs(row)) // default_num_envs(row)


def peer_config(row: str, total_timesteps: int, num_envs: int | None = None) -> dict:
    """PureJaxRL's config dict for ``row`` (an env, or CartPole-GRU), at ``num_envs`` envs (default: the row's)."""
    base = _PENDULUM if row == "Pendulum-v1" else _CARTPOLE
    env = "CartPole-v1" if row == "CartPole-GRU" else row
    return {
        **_COMMON,
        **base,
        "ENV_NAME": env,
        "TOTAL_TIMESTEPS": total_timesteps,
        "NUM_ENVS": num_envs or base["NUM_ENVS"],
    }


def our_config(env: str, total_timesteps: int, num_envs: int | None = None) -> PPOConfig:
    """The PPOConfig doing the same work as ``peer_config(env, total_timesteps, num_envs)``."""
    num_envs = num_envs or default_num_envs(env)
    if env == "CartPole-v1":
        return PPOConfig(env=env, total_timesteps=total_timesteps, num_envs=num_envs)
    if env == "CartPole-GRU":
        return PPOConfig(
            env="CartPole-v1",
            total_timesteps=total_timesteps,
            num_envs=num_envs,
            network="gru",
            shared_torso=True,
            hidden_sizes=(128,),
            activation="relu",
            rnn_hidden_size=128,
            head_hidden_sizes=(128,),
        )
    return PPOConfig(
        env=env,
        total_timesteps=total_timesteps,
        num_envs=num_envs,
        num_steps=256,
        num_minibatches=32,
        update_epochs=10,
        lr=1e-3,
        ent_coef=0.0,
        normalize_obs=True,
        normalize_reward=True,
        hidden_sizes=(256, 256),
    )


def _final_return_ours(out, num_updates: int) -> float:
    last = max(1, num_updates // 20)
    return float(np.nanmean(np.asarray(out.metrics["episode_return"])[:, -last:]))


def _final_return_peer(out, num_updates: int) -> float:
    last = max(1, num_updates // 20)
    info = out["metrics"] if "metrics" in out else out["metric"]  # ppo_rnn.py names it metric
    returns = np.asarray(info["returned_episode_returns"])[:, -last:]
    finished = np.asarray(info["returned_episode"])[:, -last:].astype(bool)
    return float(returns[finished].mean()) if finished.any() else float("nan")


def _compile(fn, *args) -> tuple[object, float]:
    jax.clear_caches()  # every compile starts from the same (warm-process, cold-cache) state
    start = time.perf_counter()
    compiled = jax.jit(fn).lower(*args).compile()
    return compiled, time.perf_counter() - start


def compile_both(sides: dict, rounds: int = COMPILE_ROUNDS) -> tuple[dict, dict]:
    """``{side: (fn, args)}`` compiled ``rounds`` times each, the order swapped every round: the compiled
    programs and each side's fastest compile. The first compile in a process also pays one-time costs
    (about 3 s here), which a single compile would charge to whichever side went first."""
    compiled, seconds = {}, {side: [] for side in sides}
    for round_ in range(rounds):
        for side in list(sides) if round_ % 2 == 0 else list(reversed(list(sides))):
            compiled[side], took = _compile(*sides[side])
            seconds[side].append(took)
    return compiled, {side: min(times) for side, times in seconds.items()}


def _time(compiled, *args) -> tuple[float, object]:
    start = time.perf_counter()
    out = jax.block_until_ready(compiled(*args))
    return time.perf_counter() - start, out


def compare(peer_module, env: str, seeds: int, total_timesteps: int, repeats: int, num_envs: int) -> dict:
    """One row of the table: both sides compiled, then run alternately ``repeats`` times each."""
    cfg = our_config(env, total_timesteps, num_envs)
    keys = jax.random.split(jax.random.key(0), seeds)
    peer_keys = jax.random.split(jax.random.PRNGKey(0), seeds)
    ours = vmap_runs(train, in_axes=(None, 0))  # as ppo-jax train runs its seeds: one seed unbatched
    peer = vmap_runs(
        peer_module.make_train(peer_config(env, total_timesteps, num_envs)), in_axes=(0,)
    )  # 1 seed: as its __main__
    compiled, compile_s = compile_both({"ours": (ours, cfg, keys), "peer": (peer, peer_keys)})
    ours_compile, peer_compile = compile_s["ours"], compile_s["peer"]
    sides = {"ours": (compiled["ours"], (cfg, keys)), "peer": (compiled["peer"], (peer_keys,))}
    times, outs = {"ours": [], "peer": []}, {}
    for round_ in range(repeats):
        for side in ("ours", "peer") if round_ % 2 == 0 else ("peer", "ours"):
            seconds, outs[side] = _time(sides[side][0], *sides[side][1])
            times[side].append(seconds)
    env_steps = seeds * cfg.num_updates * cfg.batch_size
    row = {
        "env": env,
        "seeds": seeds,
        "num_envs": cfg.num_envs,
        "num_steps": cfg.num_steps,
        "num_updates": cfg.num_updates,
        "env_steps_per_seed": cfg.num_updates * cfg.batch_size,
    }
    for side, compile_s, final in (
        ("ours", ours_compile, _final_return_ours(outs["ours"], cfg.num_updates)),
        ("peer", peer_compile, _final_return_peer(outs["peer"], cfg.num_updates)),
    ):
        row[side] = {
            "compile_s": round(compile_s, 2),
            "run_s_min": round(min(times[side]), 3),
            "run_s_median": round(statistics.median(times[side]), 3),
            "run_s_all": [round(t, 3) for t in times[side]],
            "env_steps_per_s": round(env_steps / min(times[side])),
            "final_return": round(final, 1),
        }
    row["speedup_min"] = round(min(times["peer"]) / min(times["ours"]), 3)
    row["speedup_median"] = round(statistics.median(times["peer"]) / statistics.median(times["ours"]), 3)
    row["compile_ratio"] = round(ours_compile / peer_compile, 3)
    return row


def time_ours(env: str, seeds: int, total_timesteps: int, repeats: int, num_envs: int) -> dict:
    """Ours alone, ``repeats`` timed runs after one compile: the run seconds and env steps/s (from the min)."""
    cfg = our_config(env, total_timesteps, num_envs)
    keys = jax.random.split(jax.random.key(0), seeds)
    compiled = jax.jit(vmap_runs(train, in_axes=(None, 0))).lower(cfg, keys).compile()
    times = [_time(compiled, cfg, keys)[0] for _ in range(repeats)]
    return {
        "run_s_min": round(min(times), 3),
        "run_s_all": [round(t, 3) for t in times],
        "env_steps_per_s": round(seeds * cfg.num_updates * cfg.batch_size / min(times)),
    }


HEADER = (
    f"{'env':<12} {'seeds':>5} {'envs':>5} {'steps/seed':>10} | {'ours steps/s':>12} {'peer steps/s':>12} {'x (min)':>7} "
    f"{'x (med)':>7} | {'ours comp s':>11} {'peer comp s':>11} | {'ours return':>11} {'peer return':>11}"
)


def _without_flag_line(row: dict) -> str:
    """The second line of a row that also timed ours without the scheduler flag ("" if it did not)."""
    alone = row.get("ours_without_flag")
    if alone is None:
        return ""
    if alone["status"] != "ok":
        text = alone["status"]
    else:
        text = f"{alone['env_steps_per_s']:,} env steps/s"
        if "speedup_without_flag" in row:
            text += f", {row['speedup_without_flag']:.2f}x the peer's min (not alternated)"
    return f"\n{'':<12} {'':>5} {'':>5} {'':>10} | ours alone without the flag: {text}"


def format_row(row: dict, with_alone: bool = True) -> str:
    alone = _without_flag_line(row) if with_alone else ""
    if row.get("status", "ok") != "ok":
        return f"{row['env']:<12} {row['seeds']:>5} {row['num_envs']:>5} {'':>10} | {row['status']}" + alone
    o, p = row["ours"], row["peer"]
    return (
        f"{row['env']:<12} {row['seeds']:>5} {row['num_envs']:>5} {row['env_steps_per_seed']:>10,} | "
        f"{o['env_steps_per_s']:>12,} "
        f"{p['env_steps_per_s']:>12,} {row['speedup_min']:>7.2f} {row['speedup_median']:>7.2f} | "
        f"{o['compile_s']:>11.1f} {p['compile_s']:>11.1f} | {o['final_return']:>11.1f} {p['final_return']:>11.1f}"
        + alone
    )


def run(
    peer_path,
    envs,
    seed_counts,
    total_timesteps: int | None,
    repeats: int,
    row_timeout: float = ROW_TIMEOUT,
    num_envs: int | None = None,
) -> list[dict]:
    """Every (env, seeds) row, each in a fresh process (``run_row``), printed as it finishes; ``num_envs``
    (default: each row's own) on both sides."""
    rows = []
    print(HEADER)
    print("-" * len(HEADER))
    for env in envs:
        for seeds in seed_counts:
            steps = total_timesteps or default_steps(env, num_envs)
            row = run_row(
                peer_path,
                env,
                seeds,
                steps,
                repeats,
                row_timeout,
                num_envs or default_num_envs(env),
                on_pair=lambda pair: print(format_row(pair, with_alone=False), flush=True),
            )
            rows.append(row)
            if _without_flag_line(row):
                print(_without_flag_line(row).lstrip("\n"), flush=True)
    return rows


def run_row(
    peer_path,
    env: str,
    seeds: int,
    total_timesteps: int,
    repeats: int,
    timeout: float,
    num_envs: int,
    on_pair=lambda row: None,
) -> dict:
    """One row, ``compare`` in a child process with a time limit; ``on_pair(row)`` is called once the
    alternated pair is timed, before the extra timing below (which can take as long again).

    Under ``vmap`` PureJaxRL's orthogonal init is a batched LAPACK QR, which hangs XLA's CPU
    runtime (idle CPU, forever) at 16 seeds on Pendulum and 64 on CartPole on a 2-core VM unless
    ``SCHEDULER_FLAG`` is set. Rows with more than one seed therefore run *both* programs under it
    (the row records its ``xla_flags``); a row with no result after ``timeout`` seconds is reported
    as hung instead of stopping the table.

    ppo_jax needs no such flag (its init is QR-free) and runs slower under it, so such a row also
    times ours alone in a second child without the flag (``ours_without_flag``: what a user of
    ppo_jax gets) and compares it with the peer's flagged minimum (``speedup_without_flag``; the
    two were not alternated, so machine drift between them is not cancelled).
    """
    own_flags = os.environ.get("XLA_FLAGS", "")
    flags = own_flags
    if seeds > 1 and SCHEDULER_FLAG not in flags:
        flags = f"{flags} {SCHEDULER_FLAG}".strip()
    row = {"env": env, "seeds": seeds, "num_envs": num_envs, "xla_flags": flags}
    work = [peer_path, env, seeds, total_timesteps, repeats, num_envs]
    row.update(_child(["pair", *work], flags, timeout))
    on_pair(row)
    if flags != own_flags:
        alone = _child(["ours", *work], own_flags, timeout)
        row["ours_without_flag"] = {**alone, "xla_flags": own_flags}
        if alone["status"] == "ok" and row["status"] == "ok":
            row["speedup_without_flag"] = round(row["peer"]["run_s_min"] / alone["run_s_min"], 3)
    return row


def _child(args: list, flags: str, timeout: float) -> dict:
    """Run this file as a child (``pair``: ``compare``; ``ours``: ``time_ours``) under ``XLA_FLAGS=flags``."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "row.json"
        command = [sys.executable, __file__, *map(str, args), str(out)]
        try:
            subprocess.run(command, env={**os.environ, "XLA_FLAGS": flags}, timeout=timeout, check=True)
        except subprocess.TimeoutExpired:
            return {"status": f"hung: no result after {timeout:.0f} s (XLA_FLAGS={flags or 'unset'})"}
        except subprocess.CalledProcessError as error:
            return {"status": f"failed: exit status {error.returncode}"}
        return {**json.loads(out.read_text()), "status": "ok"}


if (
    __name__ == "__main__"
):  # a child of run_row: pair|ours PEER_PATH ENV SEEDS TOTAL_TIMESTEPS REPEATS NUM_ENVS OUT.json
    from purejaxrl_peer import load  # scripts/ is sys.path[0] here

    mode, peer_path, env, *work, out = sys.argv[1:]
    seeds, total_timesteps, repeats, num_envs = map(int, work)
    if mode == "pair":
        result = compare(load(Path(peer_path), PEER_SCRIPTS[env]), env, seeds, total_timesteps, repeats, num_envs)
    else:
        result = time_ours(env, seeds, total_timesteps, repeats, num_envs)
    Path(out).write_text(json.dumps(result))
