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
      checkpoints/     with --checkpoint-every: the state of each chunk in flight
                       (``ppo_jax.sweep.segmented``), removed once its file is written
      claims/          with --part: the chunks parts are running (``ppo_jax.sweep.claims``)
      corrupt/         files found unreadable, moved aside (``ppo_jax.storage.corrupt``)
      metrics.parquet  the merged table once every chunk is done, rows in canonical order
      summary.csv      final values per env x setting: mean over seeds and 95% bootstrap CI

The directory is created complete (``ppo_jax.storage.atomic.write_directory``),
so parts racing to create it agree on one plan. With ``force`` an old directory
is moved aside and deleted only once the new sweep is complete. A directory
written before a config field was renamed (``ConfigBase.LEGACY_FIELDS``) still
resumes: its stored spec is read through the same translation.

Everything read back is checked. A chunk, the table or the summary that cannot
be read is moved into ``corrupt/`` with a warning and computed again; spec.json,
plan.json and metadata.json cannot be, so a corrupt one stops the sweep with an
error naming it (``ppo_jax.errors.CorruptFileError``). ``check_sweep_dir``
checks a finished directory without changing it (for a report).
"""

from __future__ import annotations

import difflib
import json
import re
import shutil
from pathlib import Path

import yaml

from ppo_jax.errors import CorruptFileError, SpecError
from ppo_jax.storage.atomic import (
    append_text,
    json_safe,
    read_json,
    remove_replaced,
    write_directory,
    write_file,
    write_json,
)
from ppo_jax.storage.corrupt import corrupt, parquet_rows, read_csv, set_aside
from ppo_jax.storage.provenance import now_iso
from ppo_jax.storage.run_dir import METADATA_FILE, prepare_out_dir
from ppo_jax.sweep.spec import SweepSpec

SPEC_YAML, SPEC_JSON, PLAN_FILE, LOG_FILE = "spec.yaml", "spec.json", "plan.json", "sweep.log"
CHUNK_DIR, TABLE_FILE, SUMMARY_FILE, CLAIMS_DIR = "chunks", "metrics.parquet", "summary.csv", "claims"
RECOMPUTE = "it is computed again by ppo-jax sweep SPEC --out DIR --resume"
KEYS = ("env", "setting_id", "seed", "update", "env_steps")
CHUNK_FILE = re.compile(r"g\d{3}-c\d{5}\.parquet")


def spec_record(spec: SweepSpec) -> dict:
    """What spec.json holds: the normal form and the expanded settings (random samples included)."""
    settings = [
        {
            "setting_id": s.setting_id,
            "env": s.env,
            **{k: list(v) if isinstance(v, tuple) else v for k, v in s.values.items()},
        }
        for s in spec.settings
    ]
    return {"spec": spec.canonical, "settings": settings}


def _translate_legacy(spec: SweepSpec, record: dict) -> dict:
    """A stored record with older field names translated as ``ConfigBase.from_dict`` does (``LEGACY_FIELDS``)."""
    legacy = spec.task.config_class.LEGACY_FIELDS

    def translate(values):
        if not isinstance(values, dict):
            return values
        values = dict(values)
        for old, rename in legacy.items():
            if old in values:
                values.update({k: v for k, v in rename(values.pop(old)).items() if k not in values})
        return values

    record = json.loads(json.dumps(record))
    canonical = record.get("spec", {})
    if isinstance(canonical, dict):
        canonical["base"] = translate(canonical.get("base"))
        if isinstance(canonical.get("env_base"), dict):
            canonical["env_base"] = {env: translate(values) for env, values in canonical["env_base"].items()}
    return record


def is_sweep_dir(path: Path) -> bool:
    return (path / SPEC_JSON).is_file() and (path / PLAN_FILE).is_file()


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


def chunk_path(out: Path, chunk_id: str) -> Path:
    return Path(out) / CHUNK_DIR / f"{chunk_id}.parquet"


def intact_chunks(out: Path, rows: dict[str, int], warn) -> set[str]:
    """Ids of the chunks (``rows``: id -> its row count) whose file is in place and whole, by its footer.

    A file that is not (truncated, garbled, other rows) is moved into ``corrupt/`` with ``warn(message)``,
    so that the chunk runs again.
    """
    intact = set()
    for chunk_id in sorted(done_chunks(out) & set(rows)):
        path = chunk_path(out, chunk_id)
        try:
            found = parquet_rows(path, KEYS, fix=None)
            if found != rows[chunk_id]:
                raise corrupt(path, ValueError(f"{found} rows, the plan has {rows[chunk_id]}"), fix=None)
        except FileNotFoundError:  # moved aside by another part meanwhile
            continue
        except CorruptFileError as error:
            warn(f"{error}; moved to {_set_aside(path, out)}; running the chunk again")
            continue
        intact.add(chunk_id)
    return intact


def _set_aside(path: Path, out: Path) -> Path | str:
    try:
        return set_aside(path, out)
    except FileNotFoundError:
        return "corrupt/ by another part"


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
    stored, now = (
        _translate_legacy(spec, read_json(out / SPEC_JSON)),
        json.loads(json.dumps(json_safe(spec_record(spec)))),
    )
    if stored != now:
        raise SpecError(
            f"{out} holds a sweep of a different spec; refusing to mix results. Use another --out, or --force to "
            f"replace it. What changed:\n{spec_diff(stored, now)}"
        )
    plan = read_json(out / PLAN_FILE)
    read_json(out / METADATA_FILE)  # completed when the sweep is: unreadable, better said now than at the end
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

    def write(tmp: Path) -> None:
        (tmp / CHUNK_DIR).mkdir()
        (tmp / SPEC_YAML).write_text(
            spec.text if spec.text is not None else yaml.safe_dump(spec.canonical, sort_keys=False)
        )
        write_json(tmp / SPEC_JSON, spec_record(spec))
        write_json(tmp / PLAN_FILE, plan)
        write_json(tmp / METADATA_FILE, metadata)

    replacing = force and out.exists() and any(out.iterdir())
    try:
        out, old = write_directory(out, write, keep_old=True, replace=replacing)
    except OSError:
        if not is_sweep_dir(out):  # else another part filled `out` meanwhile
            raise
        return check_out(out, spec, resume=False, force=False, joining=True)
    if old is not None:
        write_json(out / METADATA_FILE, {**metadata, "replaced": str(old)})
    return plan


def write_chunk(out: Path, chunk_id: str, table, info: dict) -> Path:
    """Write one chunk's rows atomically; ``info`` (times, host) goes into the Parquet metadata."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = chunk_path(out, chunk_id)
    arrow = pa.Table.from_pandas(table, preserve_index=False)
    arrow = arrow.replace_schema_metadata({**(arrow.schema.metadata or {}), b"ppo_jax": json.dumps(json_safe(info))})
    try:  # page checksums: a flipped bit is found when the chunk is read back
        write_file(path, lambda tmp: pq.write_table(arrow, tmp, write_page_checksum=True))
    except FileNotFoundError:
        if not path.exists():  # else a process that merged the table removed our temp file: the chunk is there
            raise
    return path


def chunk_info(out: Path, chunk_id: str) -> dict:
    import pyarrow.parquet as pq

    metadata = pq.read_schema(chunk_path(out, chunk_id)).metadata or {}
    return json.loads(metadata.get(b"ppo_jax", b"{}"))


def read_chunks(out: Path, chunk_ids):
    """The rows of the given chunks, concatenated in that order (a pandas DataFrame).

    A chunk that cannot be read is moved into ``corrupt/`` and named in a CorruptFileError (``--resume`` runs it again).
    """
    import pandas as pd

    frames = []
    for chunk_id in chunk_ids:
        path = chunk_path(out, chunk_id)
        try:
            frames.append(pd.read_parquet(path, page_checksum_verification=True))
        except FileNotFoundError:
            raise
        except (OSError, ValueError) as error:
            moved = _set_aside(path, Path(out))
            raise corrupt(path, error, f"moved to {moved}; run the sweep again with --resume to compute it") from None
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def results_intact(out: Path, num_rows: int, warn) -> bool:
    """Whether metrics.parquet (``num_rows`` rows) and summary.csv are in place and readable; a corrupt one is moved aside."""
    out = Path(out)
    for path in (out / TABLE_FILE, out / SUMMARY_FILE):
        if not path.exists():
            return False
        try:
            if path.name == TABLE_FILE and parquet_rows(path, KEYS, fix=None) != num_rows:
                raise corrupt(path, ValueError(f"not the {num_rows} rows of the chunks"), fix=None)
            if path.name == SUMMARY_FILE:
                read_csv(path, ("env", "setting_id"), fix=None)
        except CorruptFileError as error:
            warn(f"{error}; moved to {_set_aside(path, out)}; merging the table again")
            return False
    return True


def log_line(info: dict) -> str:
    """One line per finished chunk, for the console and sweep.log."""
    compiled = f"compile {info['compile_seconds']:.1f} s, " if info["compile_seconds"] else ""
    return (
        f"chunk {info['chunk']}: {info['pairs']} pairs on {info['devices']} device(s), {compiled}"
        f"run {info['run_seconds']:.1f} s, {info['env_steps_per_second']:,.0f} {info.get('unit', 'env steps')}/s"
    )


def final_metadata(out: Path, chunk_ids: list[str]) -> dict:
    """What metadata.json gains when the sweep is complete: per-chunk times and totals, and ``pretrained``: each
    pretrained model's ``Task.describe_shared`` by pretraining seed (SFT steps, loss, pass@k curve), as recorded by
    the chunk that pretrained it."""
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
        "processes": processes(chunks),
        "pretrained": {str(c["pretrain"]["pretrain_seed"]): c["pretrain"] for c in chunks if "pretrain" in c},
        "chunks": chunks,
    }


def processes(chunks: list[dict]) -> list[dict]:
    """Each process that wrote chunks (host, pid, the commit and dirty flag of its tree, how many chunks), in the
    order of its first chunk: the parts of a sweep may run different trees, and every one is recorded."""
    found: dict[tuple, dict] = {}
    for chunk in chunks:
        key = (chunk.get("host"), chunk.get("pid"), chunk.get("git_commit"), chunk.get("git_dirty"))
        entry = found.setdefault(key, dict(zip(("host", "pid", "git_commit", "git_dirty"), key, strict=True), chunks=0))
        entry["chunks"] += 1
    return list(found.values())


def append_log(out: Path, line: str) -> None:
    append_text(Path(out) / LOG_FILE, line.rstrip("\n") + "\n")


def finish(out: Path, table, summary, metadata_updates: dict) -> None:
    """Write metrics.parquet and summary.csv (atomically), complete metadata.json, drop leftovers.

    Leftovers: temporary chunk files of killed processes, claims of parts, and the sweep that
    ``force`` replaced.
    """
    out = Path(out)
    for leftover in (out / CHUNK_DIR).glob(".*.tmp-*"):
        leftover.unlink(missing_ok=True)
    shutil.rmtree(out / CLAIMS_DIR, ignore_errors=True)
    write_file(out / TABLE_FILE, lambda tmp: table.to_parquet(tmp, index=False))
    write_file(out / SUMMARY_FILE, lambda tmp: summary.to_csv(tmp, index=False))
    metadata = {**read_json(out / METADATA_FILE), **metadata_updates}
    write_json(out / METADATA_FILE, metadata)
    remove_replaced(out, metadata.get("replaced"))


def check_sweep_dir(path) -> None:
    """Read back every file of a sweep directory, changing nothing; CorruptFileError naming the first that cannot be.

    For a report, before it reads the directory: spec.json, plan.json and metadata.json as JSON; each
    chunk's file and metrics.parquet by their footers (the table: as many rows as the chunks, where the chunk
    files are still there); summary.csv.
    The message says what to do: ``--resume`` computes a chunk, the table and the summary again; the rest
    cannot be.
    """
    path = Path(path)
    read_json(path / SPEC_JSON)
    read_json(path / METADATA_FILE)
    plan = read_json(path / PLAN_FILE)
    if not isinstance(plan, dict) or not isinstance(plan.get("chunks", []), list):
        raise corrupt(path / PLAN_FILE, ValueError("not a plan: expected an object with a list of chunks"), None)
    planned = {str(c.get("id")) for c in plan.get("chunks", []) if isinstance(c, dict)}
    done = done_chunks(path)
    rows = sum(parquet_rows(chunk_path(path, c), KEYS, RECOMPUTE) for c in sorted(done))
    table = path / TABLE_FILE
    if table.exists() and (found := parquet_rows(table, KEYS, RECOMPUTE)) != rows and done and planned <= done:
        raise corrupt(table, ValueError(f"{found} rows, its chunks have {rows}"), RECOMPUTE)
    if (path / SUMMARY_FILE).exists():
        read_csv(path / SUMMARY_FILE, ("env", "setting_id"), RECOMPUTE)
