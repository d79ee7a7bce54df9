"""The GPU rows of issue 27 in one command, within a device-time budget, into one folder: our PPO beside PureJaxRL's
(at 2048 envs and at 64 seeds) and beside Brax's own (at 2048 and 4096 envs), the Llama/Qwen decoder beside
transformers on a local checkpoint, and as much of the PPO paper's Table 1 on the seven Brax tasks as the rest of the
budget allows.

On a machine with one GPU and no network (nothing is installed: the package with its ``[cuda12,brax]`` extras, and
distrax for the peer, must be there), with a PureJaxRL checkout carried along as the peer
(``git clone https://github.com/luchris429/purejaxrl``):

    python scripts/gpu_suite.py --out gpu_results --peer-path purejaxrl     # 8 minutes (--budget-s 480)
    python scripts/gpu_suite.py --out gpu_results --peer-path purejaxrl     # again: resumes, skipping what is done
    python scripts/gpu_suite.py --out /tmp/gpu_suite --tiny                 # every step at tiny sizes, on the CPU

Each step runs the repository's scripts as subprocesses (output in OUT/<step>.log), each part skipped when its JSON
is in OUT already, before a deadline carved from the budget (against at most 30% of it, brax 35%, decoder 20%, table1
the rest);
a part still running then gets SIGINT, and SIGKILL up to GRACE_S later, at the deadline:

1. against: ``scripts/bench.py --against purejaxrl`` on CartPole-v1 and Pendulum-v1, OUT/against_2048envs.json
   (1 seed, ``--num-envs 2048`` on both sides) and OUT/against_64seeds.json (the rows' own env counts); skipped,
   with the reason, without --peer-path, without the checkout's PureJaxRL scripts, or when distrax does not import.
2. brax: ``scripts/bench_brax.py --against-brax --modes ppo`` on halfcheetah (spring, the Table 1 experiment's
   pipeline), OUT/brax_2048envs.json and OUT/brax_4096envs.json.
3. decoder: ``scripts/bench_decoder.py --model $PPO_JAX_GPU_MODEL_DIR --attn sdpa --repeats 3``, OUT/decoder.json:
   sampling and a GRPO step of the package's decoder beside transformers + torch on the same weights, on one GPU
   (SmolLM2-135M or Qwen2.5-0.5B, say: nothing is downloaded); skipped, with the reason, when that variable does not
   name a directory or torch and transformers (the ``[fixtures]`` extra) do not import.
4. table1: ``ppo-jax sweep experiments/objectives_brax.yaml --resume --checkpoint-every 10%`` into OUT/table1/sweep:
   the SIGINT loses at most a segment and the next run continues. ``ppo-jax report`` refuses a partial sweep, so
   once every chunk is done, ``ppo-jax report --normalize best-setting`` into OUT/table1/report, and OUT/table1.json.

OUT/summary.json: each step's status (ok, skipped, failed, timed_out), seconds, reason and files, and the
provenance; OUT/summary.md: the same table, then the steps' results. Exit status 1 if a step failed.

``--tiny``: against on CartPole-v1 at 8 envs and at 2 seeds, 4096 env steps; brax on inverted_pendulum at 4 envs,
1 update, without Brax's own PPO (about 45 s of compiling on 2 CPU cores); decoder with ``--quick`` (when the variable
names a directory); table1 on inverted_pendulum, the three clip settings, 1 seed, 2048 env steps
(OUT/table1_tiny.yaml).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import bench_against  # scripts/bench_against.py
import yaml

from ppo_jax.sweep import sweep_dir

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"
TABLE1_SPEC = ROOT / "experiments" / "objectives_brax.yaml"
# Pairs per chunk: each group (one objective on one task, 3 to 12 pairs) in one chunk, sized without a compile.
TABLE1_CHUNK = 39
SHARES = {"against": 0.30, "brax": 0.35, "decoder": 0.20}  # the most of the budget each may take; table1: the rest
MODEL_DIR_VAR = "PPO_JAX_GPU_MODEL_DIR"  # the decoder step's checkpoint directory
GRACE_S = 30.0  # SIGINT this long before a step's deadline (at most a quarter of its time), SIGKILL at it
MIN_STEP_S = 10.0  # a step with less time left is skipped


def against_parts(peer: Path, tiny: bool) -> list[tuple[str, list[str]]]:
    """(JSON file, command) of the against step: ``--num-envs`` at 1 seed, and many seeds at the rows' env counts."""
    envs, wide, many = (["CartPole-v1"], 8, 2) if tiny else (["CartPole-v1", "Pendulum-v1"], 2048, 64)
    command = [sys.executable, str(SCRIPTS / "bench.py"), "--against", "purejaxrl", "--peer-path", str(peer)]
    command += ["--envs", *envs] + (["--total-timesteps", "4096", "--repeats", "1"] if tiny else [])
    return [
        (f"against_{wide}envs.json", [*command, "--seeds", "1", "--num-envs", str(wide)]),
        (f"against_{many}seeds.json", [*command, "--seeds", str(many)]),
    ]


def brax_parts(tiny: bool) -> list[tuple[str, list[str]]]:
    """(JSON file, command) of the brax step, one per env count."""
    task, counts, extra = (
        ("inverted_pendulum", [4], ["--updates", "1"]) if tiny else ("halfcheetah", [2048, 4096], ["--against-brax"])
    )
    command = [sys.executable, str(SCRIPTS / "bench_brax.py"), "--task", task, "--backends", "spring", "--modes", "ppo"]
    return [(f"brax_{n}envs.json", [*command, "--envs", str(n), *extra]) for n in counts]


def decoder_parts(model_dir: Path, tiny: bool) -> list[tuple[str, list[str]]]:
    """(JSON file, command) of the decoder step: the package's decoder beside transformers on ``model_dir``."""
    command = [sys.executable, str(SCRIPTS / "bench_decoder.py"), "--model", str(model_dir), "--attn", "sdpa"]
    return [("decoder.json", [*command, *(["--quick"] if tiny else ["--repeats", "3"])])]


def tiny_spec(path: Path) -> Path:
    """objectives_brax.yaml cut to inverted_pendulum, its clip settings (one program), 1 seed, 2048 env steps."""
    spec = yaml.safe_load(TABLE1_SPEC.read_text())
    keep = [i for i, objective in enumerate(spec["zip"]["objective"]) if objective == "clip"]
    spec.update(name=f"{spec['name']}_tiny", envs=["brax/inverted_pendulum"], seeds=1)
    spec["zip"] = {field: [values[i] for i in keep] for field, values in spec["zip"].items()}
    spec["base"].update(total_timesteps=2048, num_steps=256, num_minibatches=4, update_epochs=2)
    del spec["env_base"]  # swimmer's backend
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def run_command(command: list[str], log: Path, deadline: float, env: dict) -> tuple[str, str]:
    """``command`` in its own process group, cwd and output in ``log``'s folder; SIGINT before ``deadline``
    (``time.monotonic``), SIGKILL at it: (status, reason)."""
    grace = min(GRACE_S, max(0.0, deadline - time.monotonic()) / 4)
    with log.open("a") as stream:
        stream.write(f"\n$ {shlex.join(command)}\n")
        stream.flush()
        process = subprocess.Popen(
            command, stdout=stream, stderr=subprocess.STDOUT, cwd=log.parent, env=env, start_new_session=True
        )
        try:
            code = process.wait(timeout=max(0.0, deadline - grace - time.monotonic()))
            stop = ""
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGINT)
            stop = "SIGINT"
            try:
                code = process.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                stop += f", SIGKILL {grace:.0f} s later"
                code = process.wait()
    if code == 0:
        return "ok", ""
    if stop:
        return "timed_out", f"stopped at its deadline ({stop}; exit status {code})"
    lines = [line for line in log.read_text().splitlines() if line.strip()]
    return "failed", f"exit status {code} ({lines[-1].strip() if lines else 'no output'}; see {log.name})"


def existing(out: Path, names: list[str]) -> list[str]:
    return [name for name in names if (out / name).exists()]


def run_parts(name: str, parts: list[tuple[str, list[str]]], out: Path, deadline: float, env: dict, check=None) -> dict:
    """Each part's command with ``--out OUT/<its JSON>`` unless that file exists, until one does not end ok;
    ``check(path)`` names what is wrong in a JSON written (None: nothing)."""
    names = [file for file, _ in parts]
    files = names + [f"{name}.log"]
    todo = [(file, command) for file, command in parts if not (out / file).exists()]
    if not todo:
        reason = f"done in an earlier run (delete {', '.join(names)} to run it again)"
        return {"status": "skipped", "reason": reason, "files": existing(out, files)}
    status, reason = "ok", ""
    for file, command in todo:
        status, reason = run_command([*command, "--out", str(out / file)], out / f"{name}.log", deadline, env)
        if status == "ok" and check is not None and (problem := check(out / file)):
            status, reason = "failed", problem
        if status != "ok":
            reason = f"{file}: {reason}"
            break
    return {"status": status, "reason": reason, "files": existing(out, files)}


def against_rows_not_ok(path: Path) -> str | None:
    """The rows of an against table that did not run (hung or failed), or None."""
    bad = [
        f"{r['env']} at {r['seeds']} seeds and {r['num_envs']} envs: {r['status']}"
        for r in json.loads(path.read_text())["results"]
        if r["status"] != "ok"
    ]
    return "; ".join(bad) or None


def peer_problem(peer: Path | None, env: dict) -> str | None:
    """Why the against step cannot run, or None."""
    if peer is None:
        return "no --peer-path: give a PureJaxRL checkout (git clone https://github.com/luchris429/purejaxrl)"
    missing = [s for s in ("ppo.py", "ppo_continuous_action.py") if not (peer / "purejaxrl" / s).is_file()]
    if missing:
        return f"{peer} is not a PureJaxRL checkout: no purejaxrl/{' or purejaxrl/'.join(missing)}"
    probe = subprocess.run([sys.executable, "-c", "import distrax"], capture_output=True, text=True, env=env)
    if probe.returncode != 0:
        lines = probe.stderr.strip().splitlines() or ["no message"]
        return f"distrax, PureJaxRL's dependency, does not import: {lines[-1]}"
    return None


def decoder_problem(env: dict) -> str | None:
    """Why the decoder step cannot run, or None."""
    model_dir = env.get(MODEL_DIR_VAR)
    if not model_dir:
        return f"{MODEL_DIR_VAR} is not set: name a local checkpoint directory (SmolLM2-135M, Qwen2.5-0.5B, ...)"
    if not Path(model_dir).is_dir():
        return f"{MODEL_DIR_VAR}={model_dir} is not a directory"
    probe = subprocess.run(
        [sys.executable, "-c", "import torch, transformers"], capture_output=True, text=True, env=env
    )
    if probe.returncode != 0:
        lines = probe.stderr.strip().splitlines() or ["no message"]
        return f"torch and transformers (the [fixtures] extra), the peer, do not import: {lines[-1]}"
    return None


def sweep_progress(path: Path) -> dict:
    """The chunks of the sweep in ``path``: how many are done, and each finished one's env and times."""
    if not sweep_dir.is_sweep_dir(path):
        return {"chunks_done": 0, "chunks_total": None, "complete": False, "chunks": []}
    plan = json.loads((path / sweep_dir.PLAN_FILE).read_text())
    groups = {chunk["id"]: plan["groups"][chunk["group"]] for chunk in plan["chunks"]}
    chunks = []
    for chunk in sorted(sweep_dir.done_chunks(path)):
        info, group = sweep_dir.chunk_info(path, chunk), groups[chunk]
        chunks.append(
            {
                "chunk": chunk,
                "env": group["env"],
                "group": ", ".join(f"{k}={v}" for k, v in group["static"].items() if k != "env") or "-",
                "pairs": info["pairs"],
                "run_s": round(info["run_seconds"], 1),  # segmented chunks compile inside it
                "env_steps": info["env_steps"],
                "env_steps_per_s": round(info["env_steps_per_second"]),
            }
        )
    complete = (path / sweep_dir.TABLE_FILE).is_file()
    return {"chunks_done": len(chunks), "chunks_total": len(plan["chunks"]), "complete": complete, "chunks": chunks}


def table1(out: Path, tiny: bool, deadline: float, env: dict) -> dict:
    """The Table 1 sweep continued until ``deadline``, then, if it is complete, its report (the next run reports
    a sweep completed too late for it)."""
    files = ["table1.json", "table1.log", "table1/sweep", "table1/report/index.md", "table1/report/paper_table1.md"]
    if (out / "table1.json").exists():
        reason = "done in an earlier run (delete table1.json to report again)"
        return {"status": "skipped", "reason": reason, "files": existing(out, files)}
    spec = tiny_spec(out / "table1_tiny.yaml") if tiny else TABLE1_SPEC
    sweep, report, log = out / "table1" / "sweep", out / "table1" / "report", out / "table1.log"
    cli = [sys.executable, "-m", "ppo_jax.cli"]
    status, reason = "ok", ""
    if not (sweep / sweep_dir.TABLE_FILE).is_file():
        command = [*cli, "sweep", str(spec), "--out", str(sweep), "--resume", "--checkpoint-every", "10%"]
        status, reason = run_command([*command, "--chunk-size", str(TABLE1_CHUNK)], log, deadline, env)
    progress = sweep_progress(sweep)
    if not progress["complete"]:
        if status == "ok":
            status, reason = "failed", "the sweep ended incomplete"
        reason += f"; {progress['chunks_done']} of {progress['chunks_total'] or '?'} chunks done"
        if status == "timed_out":
            reason += "; ppo-jax report refuses a partial sweep: run the suite again with the same --out to continue"
        return {"status": status, "reason": reason, "files": existing(out, files)}
    status, reason = run_command(
        [*cli, "report", str(sweep), "--out", str(report), "--normalize", "best-setting", "--force"], log, deadline, env
    )
    if status == "ok":
        result = {
            "spec": str(spec),
            "sweep": str(sweep.relative_to(out)),
            "report": str((report / "index.md").relative_to(out)),
            "paper_table1": str((report / "paper_table1.md").relative_to(out)),
            **progress,
        }
        (out / "table1.json").write_text(json.dumps(result, indent=2))
    return {"status": status, "reason": reason, "files": existing(out, files)}


def provenance(command: list[str], env: dict) -> dict:
    """``collect_metadata(command)`` in a subprocess, on the steps' platform (this process never holds the GPU)."""
    code = "import json, sys; from ppo_jax.storage.provenance import collect_metadata; "
    code += "print(json.dumps(collect_metadata(sys.argv[1:])))"
    probe = subprocess.run([sys.executable, "-c", code, *command], capture_output=True, text=True, env=env, check=True)
    return json.loads(probe.stdout)


def _json_files(step: dict) -> list[str]:
    return [file for file in step["files"] if file.endswith(".json")]


def against_section(out: Path, step: dict) -> list[str]:
    """The against tables as bench.py prints them (x: the peer's seconds / ours)."""
    lines = []
    for file in _json_files(step):
        rows = json.loads((out / file).read_text())["results"]
        table = [bench_against.HEADER, "-" * len(bench_against.HEADER), *map(bench_against.format_row, rows)]
        lines += [f"{file}:", "", "```text", *table, "```", ""]
    return lines


def brax_section(out: Path, step: dict) -> list[str]:
    """One Markdown table of every brax row, with ours / Brax's env steps/s beside our rows."""
    rows = [row for file in _json_files(step) for row in json.loads((out / file).read_text())["results"]]
    if not rows:
        return []
    theirs = {(r["backend"], r["num_envs"]): r["env_steps_per_s"] for r in rows if r["mode"] == "brax_ppo"}
    lines = [
        "| task | backend | envs | mode | env steps | compile s | run s | env steps/s | ours / Brax's |",
        "|---|---|---:|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        key = (r["backend"], r["num_envs"])
        ratio = f"{r['env_steps_per_s'] / theirs[key]:.2f}" if r["mode"] == "ppo" and key in theirs else ""
        compile_s = "" if r["compile_s"] is None else f"{r['compile_s']:.1f}"
        lines.append(
            f"| {r['task']} | {r['backend']} | {r['num_envs']} | {r['mode']} | {r['env_steps']:,} | {compile_s} | "
            f"{r['run_s']:.2f} | {r['env_steps_per_s']:,} | {ratio} |"
        )
    return [*lines, ""]


def decoder_section(out: Path, step: dict) -> list[str]:
    """bench_decoder.py's table (package / peer: the package's throughput over transformers')."""
    lines = []
    for file in _json_files(step):
        result = json.loads((out / file).read_text())
        settings, meta = result["settings"], result["metadata"]
        lines += [
            f"{file}: {settings['model']}, {settings['parameters']:,} parameters, JAX on {meta['devices'][0]}, "
            f"torch on {meta['torch_device_name'] or meta['torch_device']}; package / peer > 1: the package is faster.",
            "",
            result["table"],
            "",
        ]
    return lines


def table1_section(out: Path) -> list[str]:
    """The sweep's progress, its finished chunks, and once reported the paper's Table 1 beside ours."""
    progress = sweep_progress(out / "table1" / "sweep")
    done = f"{progress['chunks_done']} of {progress['chunks_total'] or '?'} chunks done"
    lines = [done + (", complete" if progress["complete"] else ""), ""]
    if progress["chunks"]:
        lines += [
            "| chunk | env | setting group | pairs | run s (compile included) | env steps/s |",
            "|---|---|---|---:|---:|---:|",
            *(
                f"| {c['chunk']} | {c['env']} | {c['group']} | {c['pairs']} | {c['run_s']:.1f} | "
                f"{c['env_steps_per_s']:,} |"
                for c in progress["chunks"]
            ),
            "",
        ]
    paper = out / "table1" / "report" / "paper_table1.md"
    if paper.is_file():
        lines += [paper.read_text().strip(), "", "The report: [table1/report/index.md](table1/report/index.md)", ""]
    return lines


def markdown(summary: dict, out: Path) -> str:
    """summary.md: the steps' table, then each step's results."""
    meta, steps = summary["metadata"], summary["steps"]
    commit = (meta["git_commit"] or "no commit")[:10] + (" (dirty)" if meta["git_dirty"] else "")
    lines = [
        "# GPU suite",
        "",
        f"`{meta['command_line']}` on {meta['backend']} ({', '.join(meta['devices'])}), commit {commit}, "
        f"{meta['start_time']}: {summary['seconds']:.0f} s of a {summary['budget_s']:.0f} s budget.",
        "",
        "| step | status | seconds | files | reason |",
        "|---|---|---:|---|---|",
        *(
            f"| {name} | {step['status']} | {step['seconds']:.1f} | {', '.join(f'[{f}]({f})' for f in step['files'])} "
            f"| {step['reason']} |"
            for name, step in steps.items()
        ),
        "",
    ]
    sections = {
        "against": ("ours beside PureJaxRL", against_section(out, steps["against"])),
        "brax": ("our PPO beside Brax's own", brax_section(out, steps["brax"])),
        "decoder": ("the Llama/Qwen decoder beside transformers", decoder_section(out, steps["decoder"])),
        "table1": ("the PPO paper's Table 1 on Brax", table1_section(out)),
    }
    for name, (title, body) in sections.items():
        lines += [f"## {name}: {title}", "", *(body or [f"Nothing yet: {steps[name]['status']}.", ""])]
    return "\n".join(lines)


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="the output folder (a rerun into it resumes)")
    parser.add_argument("--budget-s", type=float, default=480.0, help="device seconds for all steps (default 480)")
    parser.add_argument("--peer-path", type=Path, default=None, help="a PureJaxRL checkout (the against step)")
    parser.add_argument("--tiny", action="store_true", help="every step at tiny sizes, on the CPU (a smoke test)")
    args = parser.parse_args(argv)
    if not (args.budget_s > 0 and math.isfinite(args.budget_s)):
        parser.error(f"--budget-s must be a positive number of seconds, got {args.budget_s:g}")
    if args.peer_path is not None and not args.peer_path.is_dir():
        parser.error(f"--peer-path {args.peer_path}: no such directory (a PureJaxRL checkout)")
    if args.out.exists() and not args.out.is_dir():
        parser.error(f"--out {args.out}: exists and is not a folder")
    try:
        args.out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        parser.error(f"--out {args.out}: cannot be created ({error.strerror})")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    argv = sys.argv[1:] if argv is None else list(argv)
    out = args.out.resolve()
    peer = args.peer_path.resolve() if args.peer_path else None
    env = {**os.environ, **({"JAX_PLATFORMS": "cpu"} if args.tiny else {})}
    start = time.monotonic()
    end = start + args.budget_s
    metadata = provenance(["python", "scripts/gpu_suite.py", *argv], env)
    steps = {}
    for name in ("against", "brax", "decoder", "table1"):
        began = time.monotonic()
        deadline = min(end, began + SHARES.get(name, 1.0) * args.budget_s)
        if name == "against" and (problem := peer_problem(peer, env)):
            result = {"status": "skipped", "reason": problem, "files": []}
        elif name == "decoder" and (problem := decoder_problem(env)):
            result = {"status": "skipped", "reason": problem, "files": []}
        elif deadline - began < MIN_STEP_S:
            reason = f"{deadline - began:.0f} s of the budget for it, under {MIN_STEP_S:.0f} s"
            result = {"status": "skipped", "reason": reason, "files": []}
        elif name == "against":
            result = run_parts(name, against_parts(peer, args.tiny), out, deadline, env, against_rows_not_ok)
        elif name == "brax":
            result = run_parts(name, brax_parts(args.tiny), out, deadline, env)
        elif name == "decoder":
            model_dir = Path(env[MODEL_DIR_VAR]).resolve()
            result = run_parts(name, decoder_parts(model_dir, args.tiny), out, deadline, env)
        else:
            result = table1(out, args.tiny, deadline, env)
        steps[name] = {**result, "seconds": round(time.monotonic() - began, 1)}
        print(f"{name}: {result['status']} in {steps[name]['seconds']:.0f} s {result['reason']}".rstrip(), flush=True)
    summary = {
        "budget_s": args.budget_s,
        "seconds": round(time.monotonic() - start, 1),
        "tiny": args.tiny,
        "steps": steps,
        "metadata": metadata,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    (out / "summary.md").write_text(markdown(summary, out))
    print(f"wrote {out / 'summary.json'} and {out / 'summary.md'}")
    return 1 if any(step["status"] == "failed" for step in steps.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
