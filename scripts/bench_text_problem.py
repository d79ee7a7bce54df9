"""What a text problem's Python side costs per update: prompts drawn and tokenized, responses decoded and scored.

``text_addition`` (``ppo_jax.lm.text_problems``) reaches Python from the compiled
program through ``jax.pure_callback``; per update it draws and renders
``num_prompts`` questions and scores ``num_prompts x group_size`` responses. This
times those callbacks under ``jax.jit`` (``sample_prompts`` alone, ``verify``
alone: the host work plus the callback's round trip), and an in-graph problem's
``verify`` of the same batch (the lab's token-level addition) beside it, each the
median of ``--repeats`` calls after a warm-up. The checkpoint's tokenizer is the
committed fixture's (a 300-token byte-level BPE); a real one (150k tokens) encodes
and decodes at a similar per-token cost in the Rust library.

    python scripts/bench_text_problem.py --out docs/results/bench_text_problem/bench.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import jax
import numpy as np

from ppo_jax.lm import problems, tokens
from ppo_jax.lm.config import LmConfig
from ppo_jax.storage.provenance import collect_metadata

FIXTURE = Path(__file__).resolve().parents[1] / "tests" / "lm" / "fixtures" / "checkpoints" / "qwen2"


def median_seconds(fn, repeats: int) -> tuple[float, list[float]]:
    jax.block_until_ready(fn())
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn())
        samples.append(time.perf_counter() - start)
    return statistics.median(samples), samples


def responses_for(cfg, prompts: np.ndarray, group_size: int, length: int) -> np.ndarray:
    """Each prompt's right answer for half of its group, a wrong one for the rest, EOS-terminated, PAD after."""
    problem = problems.problem_of(cfg)
    out = np.zeros((prompts.shape[0] * group_size, length), np.int32)
    for row, prompt in enumerate(np.repeat(prompts, group_size, axis=0)):
        answer = int(problem.task.demonstration(problem.decode(cfg, prompt))) + (row % 2)
        ids = np.append(problem.encode(cfg, str(answer)), tokens.EOS)[:length]
        out[row, : ids.size] = ids
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-prompts", type=int, default=64)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--digits", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)

    text = LmConfig(problem="text_addition", model=str(FIXTURE), digits=args.digits)
    lab = LmConfig(problem="addition", digits=args.digits)
    sequences = args.num_prompts * args.group_size
    length = problems.response_len(text)

    text_prompts = jax.jit(lambda key: problems.sample_prompts(text, key, args.num_prompts))
    prompts = np.asarray(text_prompts(jax.random.key(0)))
    responses = responses_for(text, prompts, args.group_size, length)
    repeated = np.repeat(prompts, args.group_size, axis=0)
    text_verify = jax.jit(lambda p, r: problems.verify(text, p, r).correct)
    accuracy = float(np.mean(np.asarray(text_verify(repeated, responses))))

    lab_prompts = np.repeat(
        np.asarray(problems.sample_prompts(lab, jax.random.key(0), args.num_prompts)), args.group_size, 0
    )
    lab_responses = np.zeros((sequences, problems.response_len(lab)), np.int32)
    lab_verify = jax.jit(lambda p, r: problems.verify(lab, p, r).correct)

    cases = {
        f"text_addition sample_prompts ({args.num_prompts} prompts)": lambda: text_prompts(jax.random.key(1)),
        f"text_addition verify ({sequences} responses)": lambda: text_verify(repeated, responses),
        f"addition verify, in-graph ({sequences} responses)": lambda: lab_verify(lab_prompts, lab_responses),
    }
    results = {}
    print("| case | median ms | per sequence (us) |\n|---|---|---|")
    for name, fn in cases.items():
        seconds, samples = median_seconds(fn, args.repeats)
        results[name] = {"median_seconds": seconds, "samples": samples}
        count = args.num_prompts if "sample_prompts" in name else sequences
        print(f"| {name} | {1e3 * seconds:.2f} | {1e6 * seconds / count:.1f} |")
    print(f"(scorer sanity: {accuracy:.2f} of the responses right; half were built right)")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        record = {
            "config": vars(args) | {"out": str(args.out)},
            "results": results,
            "scorer_accuracy": accuracy,
            "provenance": collect_metadata(sys.argv, "lm"),
        }
        args.out.write_text(json.dumps(record, indent=2, default=str) + "\n")


if __name__ == "__main__":
    main()
