"""The sweep directory: one per sweep, written chunk by chunk, resumable, shared by parts.

Layout::

    DIR/
      spec.yaml        the spec as given
      spec.json        its normal form and the expanded settings (what --resume compares)
      plan.json        groups (programs), chunk sizes, and the pairs of every chunk
      metadata.json    as for ``ppo-jax train``, plus programs, chunks, devices, hosts,
                       memory estimates; completed with times when the sweep is done
      sweep.log        one line per chunk: compile and run seconds, env steps/s
      chunks/          one Parquet file per finished chunk (temp file + rename);
                       ``pd.read_parquet(DIR / "chunks")`` reads a sweep in progress
      metrics.parquet  the merged table once every chunk is done, rows in canonical order
      summary.csv      final return per env x setting: mean over seeds and 95% bootstrap CI

The directory is created complete (in a temporary sibling, then renamed), so
parts racing to create it agree on one plan. With ``force`` an old directory is
moved aside and deleted only once the new sweep is complete.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import shutil
import uuid
from pathlib import Path

import yaml

from ppo_jax.run_dir import METADATA_FILE, json_safe, now_iso, prepare_out_dir
from ppo_jax.sweep_spec import SpecError, SweepSpec

SPEC_YAML, SPEC_JSON, PLAN_FILE, LOG_FILE = "spec.yaml", "spec.json", "plan.json", "sweep.log"
CHUNK_DIR, TABLE_FILE, SUMMARY_FILE = "chunks", "metrics.parquet", "summary.csv"
CHUNK_FILE = re.compile(r"g\d{3}-c\d{5}\.parquet")


def spec_record(spec: SweepSpec) -> dict:
    """What spec.json holds: the normal form and the expanded settings (random samples included)."""
    settings = [
        {"setting_id": s.setting_id, "env": s.env, **{k: list(v) if isinstance(v, tuple) else v for k, v in s.values.items()}}
        for s in spec.settings
    ]
    return {"spec": spec.canonical, "settings": settings}


def is_sweep_dir(path: Path) -> bool:
    return (path / SPEC_JSON).is_file() and (path / PLAN_FILE).is_file()


def read_json(path: Path):
    return json.loads(Path(path).read_text())


def _dumps(value, indent: str = "") -> str:
    """JSON with one line per innermost list (a chunk's pairs stay on one line), else like indent=2."""
    inner = indent + "  "
    if isinstance(value, dict) and value:
        items = [f"{inner}{json.dumps(k)}: {_dumps(v, inner)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + f"\n{indent}}}"
    if isinstance(value, list) and any(isinstance(v, dict) for v in value):
        return "[\n" + ",\n".join(inner + _dumps(v, inner) for v in value) + f"\n{indent}]"
    return json.dumps(value)


def write_json_atomic(path: Path, value) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{uuid.uuid4().hex[:8]}")
    tmp.write_text(_dumps(json_safe(value)) + "\n")
    os.replace(tmp, path)


def spec_diff(old: dict, new: dict, limit: int = 60) -> str:
    """Unified diff of two spec records, as YAML (at most ``limit`` lines)."""

    def lines(record):
        return yaml.safe_dump(record, sort_keys=False, default_flow_style=None, width=100).splitlines()

    diff = list(difflib.unified_diff(lines(old), lines(new), "spec in the directory", "spec now", lineterm="", n=1))
    more = f"\n... ({len(diff) - limit} more lines)" if len(diff) > limit else ""
    return "\n".join(diff[:limit]) + more


def done_chunks(out: Path) -> set[str]:
    """Ids of the chunks whose file is in place (a file is only ever renamed in complete)."""
    directory = Path(out) / CHUNK_DIR
    if not directory.is_dir():
        return set()
    return {p.name.removesuffix(".parquet") for p in directory.iterdir() if CHUNK_FILE.fullmatch(p.name)}


def check_out(out: Path, spec: SweepSpec, *, resume: bool, force: bool, joining: bool) -> dict | None:
    """Decide, before anything compiles, what to do with ``out``.

    Returns the stored plan when the sweep continues there (``resume``, or
    ``joining`` as one of several parts), None when a new sweep starts (the
    directory is missing or empty, or ``force`` will replace it). Raises
    SpecError when the directory holds a sweep of another spec (with the diff)
    or anything that may not be replaced.
    """
    out = Path(out)
    if force and (resume or joining):
        raise SpecError("--force starts the sweep over; it cannot be combined with --resume or --part.")
    if not (out.exists() and out.is_dir() and any(out.iterdir())) or force:
        prepare_out_dir(out, force)  # a file, an unwritable parent, a non-empty directory that is no output
        return None
    if not is_sweep_dir(out):
        prepare_out_dir(out, force=False)  # raises: exists and is not empty
    stored, now = read_json(out / SPEC_JSON), spec_record(spec)
    if stored != json.loads(json.dumps(json_safe(now))):
        raise SpecError(
            f"{out} holds a sweep of a different spec; refusing to mix results. Use another --out, or --force to "
            f"replace it. What changed:\n{spec_diff(stored, now)}"
        )
    plan = read_json(out / PLAN_FILE)
    if not (resume or joining):
        done, total = len(done_chunks(out)), len(plan["chunks"])
        raise SpecError(
            f"{out} already holds this sweep ({done} of {total} chunks done); pass --resume to run the missing "
            "chunks, or --force to start over."
        )
    return plan


def create(out: Path, spec: SweepSpec, plan: dict, metadata: dict, *, force: bool) -> dict:
    """Create the directory complete (spec, plan, metadata, empty chunks/); return the plan in effect.

    If another process (a part) created it first with the same spec, its plan is
    returned instead. With ``force`` an existing directory is moved aside; the
    metadata names it (``replaced``) and ``finish`` deletes it.
    """
    out = Path(os.path.abspath(out))
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.tmp-{uuid.uuid4().hex[:8]}"
    (tmp / CHUNK_DIR).mkdir(parents=True)
    try:
        (tmp / SPEC_YAML).write_text(spec.text if spec.text is not None else yaml.safe_dump(spec.canonical, sort_keys=False))
        write_json_atomic(tmp / SPEC_JSON, spec_record(spec))
        write_json_atomic(tmp / PLAN_FILE, plan)
        if force and out.exists() and any(out.iterdir()):
            old = out.parent / f".{out.name}.old-{uuid.uuid4().hex[:8]}"
            os.rename(out, old)
            metadata = {**metadata, "replaced": str(old)}
        write_json_atomic(tmp / METADATA_FILE, metadata)
        os.rename(tmp, out)  # fails if another part filled `out` meanwhile
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        if not is_sweep_dir(out):
            raise
        return check_out(out, spec, resume=False, force=False, joining=True)
    return plan


def write_chunk(out: Path, chunk_id: str, table, info: dict) -> Path:
    """Write one chunk's rows atomically; ``info`` (times, host) goes into the Parquet metadata."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    directory = Path(out) / CHUNK_DIR
    path = directory / f"{chunk_id}.parquet"
    tmp = directory / f".tmp-{chunk_id}-{uuid.uuid4().hex[:8]}.parquet"
    arrow = pa.Table.from_pandas(table, preserve_index=False)
    arrow = arrow.replace_schema_metadata({**(arrow.schema.metadata or {}), b"ppo_jax": json.dumps(json_safe(info))})
    try:
        pq.write_table(arrow, tmp)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except FileNotFoundError:
        if not path.exists():  # else a process that merged the table removed our temp file: the chunk is there
            raise
    finally:
        tmp.unlink(missing_ok=True)
    return path


def chunk_info(out: Path, chunk_id: str) -> dict:
    import pyarrow.parquet as pq

    metadata = pq.read_schema(Path(out) / CHUNK_DIR / f"{chunk_id}.parquet").metadata or {}
    return json.loads(metadata.get(b"ppo_jax", b"{}"))


def read_chunks(out: Path, chunk_ids):
    """The rows of the given chunks, concatenated in that order (a pandas DataFrame)."""
    import pandas as pd

    frames = [pd.read_parquet(Path(out) / CHUNK_DIR / f"{c}.parquet") for c in chunk_ids]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def log_line(info: dict) -> str:
    """One line per finished chunk, for the console and sweep.log."""
    compiled = f"compile {info['compile_seconds']:.1f} s, " if info["compile_seconds"] else ""
    return (
        f"chunk {info['chunk']}: {info['pairs']} pairs on {info['devices']} device(s), {compiled}"
        f"run {info['run_seconds']:.1f} s, {info['env_steps_per_second']:,.0f} env steps/s"
    )


def final_metadata(out: Path, chunk_ids: list[str]) -> dict:
    """What metadata.json gains when the sweep is complete: per-chunk times and totals."""
    chunks = [chunk_info(out, c) for c in chunk_ids]
    run_seconds = sum(c.get("run_seconds", 0.0) for c in chunks)
    env_steps = sum(c.get("env_steps", 0) for c in chunks)
    return {
        "status": "complete",
        "end_time": now_iso(),
        "compile_seconds": sum(c.get("compile_seconds", 0.0) for c in chunks),
        "run_seconds": run_seconds,
        "env_steps": env_steps,
        "env_steps_per_second": env_steps / run_seconds if run_seconds else None,
        "hosts": sorted({c.get("host") for c in chunks if c.get("host")}),
        "chunks": chunks,
    }


def append_log(out: Path, line: str) -> None:
    with open(Path(out) / LOG_FILE, "a") as f:
        f.write(line.rstrip("\n") + "\n")


def finish(out: Path, table, summary, metadata_updates: dict) -> None:
    """Write metrics.parquet and summary.csv (atomically), complete metadata.json, drop leftovers.

    Leftovers: temporary chunk files of killed processes, and the sweep that
    ``force`` replaced.
    """
    out = Path(out)
    for leftover in (out / CHUNK_DIR).glob(".tmp-*"):
        leftover.unlink(missing_ok=True)
    for name, write in ((TABLE_FILE, lambda p: table.to_parquet(p, index=False)), (SUMMARY_FILE, lambda p: summary.to_csv(p, index=False))):
        tmp = out / f".{name}.tmp-{uuid.uuid4().hex[:8]}"
        write(tmp)
        os.replace(tmp, out / name)
    metadata = {**read_json(out / METADATA_FILE), **metadata_updates}
    write_json_atomic(out / METADATA_FILE, metadata)
    old = metadata.get("replaced")
    if old and Path(old).name.startswith(f".{out.name}.old-") and Path(old).exists():
        shutil.rmtree(old, ignore_errors=True)

