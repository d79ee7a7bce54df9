"""Throughput of the lm task's transformer policy: generation (with and without the KV cache) and whole training runs.

The default LmConfig (GRPO on 3-digit addition, transformer of width 64, 2 layers,
4 heads; 64 prompts x 8 samples per update), at 1 run and at N runs vmapped in one
program (``ppo_jax.vmap_runs``, which ``ppo-jax lm --seeds N`` batches its seeds with:
one run is called unbatched, N > 1 runs go through ``jax.vmap``):

* ``generate``: ``transformer.generate`` of num_prompts x group_size responses per
  run, ``use_cache=True`` (prefill a KV cache, then one token per step) and
  ``use_cache=False`` (the full causal pass over the sequence buffer every step);
  N runs are vmapped over parameters, keys and prompts.
* ``train``: ``ppo_jax.lm.train.train`` for ``--num-updates`` updates (sample,
  score, advantages, minibatch steps), N runs vmapped over seeds
  (``jax.vmap(train, in_axes=(None, 0, None))``), all sharing one pretrained model
  from ``pretrain`` with ``--sft-steps`` SFT steps (its quality does not change
  the cost: every response is generated to ``max_response_len`` positions).

Every case is compiled ahead of time (``jax.jit(f).lower(...).compile()``, its
seconds reported apart), called once to warm up, then timed ``--repeats`` times
with ``jax.block_until_ready``; the cases alternate (A B C D A B C D ...) so drift
on a shared machine hits all alike, and the table reports the median.

Tokens: ``positions`` are sequences x response_len, every position that is
sampled (generate) or sampled and trained (train; update_epochs passes over the
batch); ``resp tok`` are the response tokens (up to and including EOS: the loss
mask) among them, counted from the outputs. "per run vs 1" is the per-run
throughput at N runs over that of one run; the second table sets N separate
runs one after another (N x the one-run seconds, no recompiling) against one
vmapped program of N.

    python scripts/bench_lm.py --out /tmp/bench_lm.json
    python scripts/bench_lm.py --runs 1 4 16 --repeats 5 --num-updates 20
    python scripts/bench_lm.py --quick --out /tmp/quick.json      # tiny sizes: a smoke test
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from ppo_jax.lm import problems, tokens, transformer
from ppo_jax.lm.config import LmConfig
from ppo_jax.lm.models import init_params, make_models
from ppo_jax.lm.train import Pretrained, pretrain, train
from ppo_jax.storage.provenance import collect_metadata
from ppo_jax.vmap_runs import vmap_runs

QUICK = dict(model_dim=16, num_layers=1, num_heads=2, num_prompts=4, group_size=2, num_minibatches=2, sft_eval_every=1)
"""--quick: tiny shapes, so that the whole script (compiles included) takes seconds."""
QUICK_COMPILER = {"xla_backend_optimization_level": 0, "xla_cpu_use_fusion_emitters": False}
"""--quick: compile cheaply (compiling dominates tiny shapes): XLA's lowest backend optimization level and the
CPU's older fusion code path, together ~3x faster to compile the train program on a 2-core CPU."""


@dataclasses.dataclass
class Case:
    """One program to time: its kind, run count, KV-cache setting, compiled call and the work of one call."""

    kind: str  # "generate" or "train"
    runs: int
    use_cache: bool | None  # generate only
    compile_s: float
    call: Callable[[], object]
    positions_per_run: int
    updates_per_run: int = 0
    times: list[float] = dataclasses.field(default_factory=list)
    response_tokens: int = 0  # all runs, from the last call's outputs

    @property
    def name(self) -> str:
        cache = "" if self.use_cache is None else ("+cache" if self.use_cache else "-cache")
        return f"{self.kind}{cache} x{self.runs}"


def progress(message: str) -> None:
    """A line on stderr while the cases compile and run (the table goes to stdout)."""
    print(f"  ... {message}", file=sys.stderr, flush=True)


def compiled(fn: Callable, args: tuple, compiler_options: dict | None) -> tuple[float, Callable]:
    """(compile seconds, the compiled function called on ``args``)."""
    start = time.perf_counter()
    program = jax.jit(fn, compiler_options=compiler_options).lower(*args).compile()
    return time.perf_counter() - start, lambda: program(*args)


def shared(cfg: LmConfig, quick: bool, compiler_options: dict | None) -> Pretrained:
    """What every run starts from: ``pretrain`` (SFT); with --quick, fresh models (no SFT program to compile).

    Not ``pretrain`` with ``sft_steps=0``: that fails (``sft`` indexes its empty array of step keys).
    """
    if not quick:
        return jax.jit(pretrain, compiler_options=compiler_options)(cfg, jax.random.key(0))

    def fresh(key):
        policy_key, scalar_key = jax.random.split(key)
        models = make_models(cfg)
        nothing = jnp.zeros((0,), jnp.float32)
        policy, scalar = init_params(models.policy, policy_key), init_params(models.scalar, scalar_key)
        return Pretrained(policy, scalar, nothing, nothing, nothing, jnp.int32(0))

    return jax.jit(fresh, compiler_options=compiler_options)(jax.random.key(0))


def generate_inputs(cfg: LmConfig, params, runs: int, compiler_options: dict | None) -> tuple:
    """Per run: its own copy of ``params``, a sampling key and prompts (num_prompts x group_size rows), stacked."""

    def inputs(params, key):
        prompt_keys, sample_keys = jax.random.split(key, (2, runs))
        prompt = jax.vmap(lambda k: problems.sample_prompts(cfg, k, cfg.num_prompts))(prompt_keys)
        copies = jax.tree.map(lambda x: jnp.broadcast_to(x, (runs, *x.shape)), params)
        return copies, sample_keys, jnp.repeat(prompt, cfg.group_size, axis=1)

    return jax.jit(inputs, compiler_options=compiler_options)(params, jax.random.key(1))


def generate_cases(cfg: LmConfig, sft_params, runs_list: list[int], compiler_options) -> list[Case]:
    model = make_models(cfg).policy
    length = problems.response_len(cfg)
    cases = []
    for runs in runs_list:
        args = generate_inputs(cfg, sft_params, runs, compiler_options)
        for use_cache in (True, False):

            def one(params, key, prompt, use_cache=use_cache):
                return transformer.generate(model, params, key, prompt, length, use_cache=use_cache)

            fn = vmap_runs(one, in_axes=(0, 0, 0))
            progress(f"generate: compiling {runs} run(s), use_cache={use_cache}")
            compile_s, call = compiled(fn, args, compiler_options)
            cases.append(Case("generate", runs, use_cache, compile_s, call, cfg.num_sequences * length))
    return cases


def train_cases(cfg: LmConfig, pretrained, runs_list: list[int], compiler_options) -> list[Case]:
    positions = cfg.num_updates * cfg.update_epochs * cfg.num_sequences * problems.response_len(cfg)
    cases = []
    for runs in runs_list:
        keys = jax.random.split(jax.random.key(2), runs)
        fn = vmap_runs(lambda c, k, p: train(c, k, p), in_axes=(None, 0, None))
        progress(f"train: compiling {runs} run(s)")
        compile_s, call = compiled(fn, (cfg, keys, pretrained), compiler_options)
        cases.append(Case("train", runs, None, compile_s, call, positions, cfg.num_updates))
    return cases


def response_tokens(case: Case, out, cfg: LmConfig) -> int:
    """Response tokens (the loss mask: up to and including the first EOS) in one call's output, all runs."""
    if case.kind == "generate":
        return int(tokens.response_mask(out).sum())
    # metrics["response_length"]: [runs, num_updates], the mean over the update's sequences
    lengths = np.asarray(out.metrics["response_length"], np.float64)
    return round(float(lengths.sum()) * cfg.num_sequences * cfg.update_epochs)


def time_cases(cases: list[Case], repeats: int, cfg: LmConfig) -> None:
    """Warm every case up, then ``repeats`` rounds over all of them in turn (A B C ... A B C ...)."""
    for case in cases:
        case.response_tokens = response_tokens(case, jax.block_until_ready(case.call()), cfg)
    for round_ in range(repeats):
        progress(f"{cases[0].kind}: timed round {round_ + 1}/{repeats}")
        for case in cases:
            start = time.perf_counter()
            jax.block_until_ready(case.call())
            case.times.append(time.perf_counter() - start)


def rows_of(cases: list[Case]) -> list[dict]:
    single = {(c.kind, c.use_cache): statistics.median(c.times) for c in cases if c.runs == 1}
    rows = []
    for case in cases:
        median = statistics.median(case.times)
        positions = case.runs * case.positions_per_run
        row = {
            "case": case.name,
            "kind": case.kind,
            "runs": case.runs,
            "use_cache": case.use_cache,
            "compile_s": round(case.compile_s, 3),
            "median_s": round(median, 4),
            "min_s": round(min(case.times), 4),
            "all_s": [round(t, 4) for t in case.times],
            "positions_per_run": case.positions_per_run,
            "positions_per_s": round(positions / median),
            "positions_per_s_per_run": round(case.positions_per_run / median),
            "response_tokens": case.response_tokens,
            "response_tokens_per_s": round(case.response_tokens / median),
        }
        if case.kind == "train":
            row["updates_per_run"] = case.updates_per_run
            row["updates_per_s_per_run"] = round(case.updates_per_run / median, 3)
        base = single.get((case.kind, case.use_cache))
        if base is not None:
            # per-run throughput at N runs / at 1 run = t1 / tN; N runs one after another take N x t1
            row["per_run_vs_1_run"] = round(base / median, 3)
            row["vmapped_cost_in_single_runs"] = round(median / base, 3)
            row["sequential_s"] = round(case.runs * base, 4)
            row["sequential_over_vmapped"] = round(case.runs * base / median, 3)
        rows.append(row)
    return rows


def cache_speedups(rows: list[dict]) -> list[dict]:
    """Generation: uncached median / cached median, per run count."""
    gen = {(r["runs"], r["use_cache"]): r["median_s"] for r in rows if r["kind"] == "generate"}
    return [
        {"runs": runs, "uncached_over_cached": round(gen[(runs, False)] / gen[(runs, True)], 3)}
        for runs in sorted({r for r, _ in gen})
        if (runs, True) in gen and (runs, False) in gen
    ]


def table(rows: list[dict]) -> str:
    head = (
        "| case | runs | KV cache | compile s | median s | positions/s (all runs) | positions/s per run "
        "| per run vs 1 | updates/s per run | resp tok/s (all runs) |"
    )
    lines = [head, "|" + "---|" * head.count(" | ") + "---|"]
    for r in rows:
        cache = {None: "", True: "yes", False: "no"}[r["use_cache"]]
        ratio = f"{r['per_run_vs_1_run']:.3f}" if "per_run_vs_1_run" in r else ""
        updates = f"{r['updates_per_s_per_run']:.2f}" if "updates_per_s_per_run" in r else ""
        lines.append(
            f"| {r['kind']} | {r['runs']} | {cache} | {r['compile_s']:.1f} | {r['median_s']:.3f} "
            f"| {r['positions_per_s']:,} | {r['positions_per_s_per_run']:,} | {ratio} | {updates} "
            f"| {r['response_tokens_per_s']:,} |"
        )
    return "\n".join(lines)


def sequential_table(rows: list[dict]) -> str:
    head = "| case | runs | N x 1-run s (sequential) | vmapped s | vmapped / 1 run | sequential / vmapped |"
    lines = [head, "|---|---|---|---|---|---|"]
    for r in rows:
        if r["runs"] > 1 and "sequential_s" in r:
            lines.append(
                f"| {r['case']} | {r['runs']} | {r['sequential_s']:.3f} | {r['median_s']:.3f} "
                f"| {r['vmapped_cost_in_single_runs']:.2f}x | {r['sequential_over_vmapped']:.2f} |"
            )
    return "\n".join(lines) if len(lines) > 2 else ""


def cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, nargs="+", default=None, help="run counts (default 1 16; --quick: 1 2)")
    parser.add_argument("--repeats", type=int, default=None, help="timed rounds (default 3; --quick: 1)")
    parser.add_argument("--num-updates", type=int, default=None, help="updates per train call (default 10)")
    parser.add_argument(
        "--sft-steps", type=int, default=None, help="SFT steps of the shared pretrain, >= 1 (default 50)"
    )
    parser.add_argument("--digits", type=int, default=None, help="addition digits (default 3; --quick: 1)")
    parser.add_argument(
        "--only", choices=["generate", "train"], default=None, help="measure one of the two (default both)"
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="tiny sizes, no SFT, one repeat, cheap compiles: a smoke test of the script",
    )
    parser.add_argument("--out", type=Path, default=Path("bench_results/bench_lm.json"))
    args = parser.parse_args(argv)
    quick = args.quick
    args.runs = args.runs or ([1, 2] if quick else [1, 16])
    args.repeats = args.repeats or (1 if quick else 3)
    args.num_updates = args.num_updates or (2 if quick else 10)
    args.sft_steps = 0 if quick else (args.sft_steps if args.sft_steps is not None else 50)
    args.digits = args.digits or (1 if quick else 3)
    args.runs = list(dict.fromkeys(args.runs))
    if min(args.runs) < 1 or args.repeats < 1 or args.num_updates < 1 or (args.sft_steps < 1 and not quick):
        parser.error("--runs, --repeats, --num-updates and --sft-steps must be positive")
    return args


def main(argv: list[str] | None = None) -> dict:
    args = parse(argv)
    argv = sys.argv[1:] if argv is None else list(argv)
    cfg = LmConfig(digits=args.digits, num_updates=args.num_updates, sft_steps=args.sft_steps)
    if args.quick:
        cfg = dataclasses.replace(cfg, **QUICK)
    compiler_options = QUICK_COMPILER if args.quick else None
    length = problems.response_len(cfg)
    print(
        f"lm: {problems.describe(cfg)}, transformer d={cfg.model_dim} L={cfg.num_layers} H={cfg.num_heads}, "
        f"{cfg.num_prompts} prompts x {cfg.group_size} samples = {cfg.num_sequences} sequences of "
        f"{problems.prompt_len(cfg)} + {length} tokens; train {cfg.num_updates} updates; runs {args.runs}; "
        f"{args.repeats} alternating rounds, medians; {os.cpu_count()} CPUs ({cpu_model()})",
        flush=True,
    )

    start = time.perf_counter()
    pretrained = jax.block_until_ready(shared(cfg, args.quick, compiler_options))
    pretrain_s = time.perf_counter() - start
    what = "fresh models (--quick)" if args.quick else f"pretrain ({cfg.sft_steps} SFT steps, compile included)"
    print(f"{what}: {pretrain_s:.1f} s", flush=True)

    rows = []
    if args.only in (None, "generate"):
        cases = generate_cases(cfg, pretrained.sft, args.runs, compiler_options)
        time_cases(cases, args.repeats, cfg)
        rows += rows_of(cases)
    if args.only in (None, "train"):
        cases = train_cases(cfg, pretrained, args.runs, compiler_options)
        time_cases(cases, args.repeats, cfg)
        rows += rows_of(cases)

    print(
        f"\npositions = sequences x response_len ({length}) per call, every position sampled (generate) or "
        f"sampled and trained (train); resp tok = response tokens up to EOS (the loss mask)\n"
    )
    print(table(rows))
    sequential = sequential_table(rows)
    if sequential:
        print("\nN separate runs one after another (N x one run, compile excluded) vs one vmapped program of N:\n")
        print(sequential)
    speedups = cache_speedups(rows)
    for s in speedups:
        print(f"\ngenerate, {s['runs']} run(s): uncached / cached time = {s['uncached_over_cached']:.2f}", end="")
    print()

    metadata = collect_metadata(["python", "scripts/bench_lm.py", *argv], task="lm")
    metadata["cpu_model"] = cpu_model()
    metadata["cpu_affinity"] = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    result = {
        "results": rows,
        "cache_speedups": speedups,
        "settings": {
            "runs": args.runs,
            "repeats": args.repeats,
            "quick": args.quick,
            "compiler_options": compiler_options,
            "sequences_per_run": cfg.num_sequences,
            "prompt_len": problems.prompt_len(cfg),
            "response_len": length,
            "pretrain_s": round(pretrain_s, 3),
            "sft_steps_taken": int(pretrained.sft_steps_taken),
            "tokens": "positions = sequences x response_len (sampled, and trained update_epochs times); "
            "response_tokens = mask-true tokens (up to and including EOS)",
        },
        "config": cfg.to_dict(),
        "metadata": metadata,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(f"wrote {args.out}")
    return result


if __name__ == "__main__":
    main()
