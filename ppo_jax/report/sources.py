"""Read run directories (``ppo-jax train``/``rlhf --out``) and sweep directories (``ppo-jax sweep --out``) into one table.

    runs = load_sources([Path("runs/clip_eps_quick"), Path("runs/my_run")])
    runs.curves     # one row per run x logged update: source, env, setting, seed, update, env_steps, metrics
    runs.evals      # one row per run: source, env, setting, seed, eval_return_stochastic, eval_return_deterministic
    runs.settings   # setting label -> {field: value} for the fields that tell settings apart
    runs.configs    # setting label -> the config (dict) of its first run

A *setting* is a configuration minus the environment and the seed. The fields
that tell settings apart are those whose value differs between two runs **on
the same environment** (so per-environment fields, such as a sweep's
``env_base:``, do not split settings); a setting's label is ``"f=v, g=w"`` over
those fields (``"default"`` when there is one setting). A run is (env, setting,
``pretrain_seed``, seed): ``pretrain_seed`` is the seed of the pretrained model it
started from (a sweep table's column; a table without it, and a run directory: the
pretraining seed in spec.json or metadata.json, else 0, as for tasks that pretrain
nothing). Every source must be
of one task (config.json's / spec.json's ``task``; none: PPO): a report never
mixes the scores of different tasks. Every problem with a file raises
``ReportError`` naming the file.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from ppo_jax.errors import ConfigError, ReportError
from ppo_jax.final_values import divergence_flags, first_divergence
from ppo_jax.storage.run_dir import CONFIG_FILE, EVALUATION_FILE, METADATA_FILE, METRICS_FILE, PARAMS_FILE
from ppo_jax.sweep.spec_values import PRESET_AXIS
from ppo_jax.sweep.table import PRETRAIN_SEED
from ppo_jax.task_contract import Task
from ppo_jax.task_registry import DEFAULT_TASK, TASKS, get_task

KEY_COLUMNS = ("seed", "update", "env_steps")


@dataclasses.dataclass
class Runs:
    curves: pd.DataFrame
    evals: pd.DataFrame
    settings: dict[str, dict]  # label -> distinguishing field values, in order of first appearance
    setting_fields: list[str]
    provenance: list[dict]  # per source: path, kind, name, metadata (versions, commit, command, hardware)
    task: Task
    configs: dict[str, dict]  # label -> every config field of the setting's first run

    @property
    def nested(self) -> bool:
        """Whether the runs start from more than one pretrained model: per-run tables gain ``pretrain_seed`` and
        intervals are hierarchical (``ppo_jax.final_values.hierarchical_bootstrap``)."""
        return self.curves[PRETRAIN_SEED].nunique() > 1


def per_run_table(table: pd.DataFrame, runs: Runs) -> pd.DataFrame:
    """A per-run table as written: without ``pretrain_seed`` unless the runs start from several pretrained models."""
    return table if runs.nested else table.drop(columns=[PRETRAIN_SEED], errors="ignore")


def _read_json(path: Path):
    if not path.is_file():
        raise ReportError(f"{path}: file missing; is {path.parent} a complete ppo-jax run or sweep directory?")
    try:
        return json.loads(path.read_text())
    except (ValueError, RecursionError) as error:  # JSONDecodeError, UnicodeDecodeError, a 5000-digit int, [[[[...
        raise ReportError(f"{path}: not valid JSON ({error}); the file is corrupt, rerun the run or sweep.") from None


def _read_table(path: Path, task: Task, required: tuple[str, ...] = ()) -> pd.DataFrame:
    if not path.is_file():
        raise ReportError(f"{path}: file missing; is {path.parent} a complete ppo-jax run or sweep directory?")
    try:
        table = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
    except Exception as error:  # pyarrow / the CSV parser raise many types for damaged files
        raise ReportError(
            f"{path}: cannot be read as a table ({type(error).__name__}: {error}); the file is corrupt."
        ) from None
    missing = [c for c in (*KEY_COLUMNS, *required, task.score) if c not in table.columns]
    if missing:
        raise ReportError(
            f"{path}: missing column(s) {missing}; this is not a ppo-jax metrics table of task {task.name}."
        )
    if table.empty:
        raise ReportError(f"{path}: the metrics table has no rows.")
    integers = [c for c in (*KEY_COLUMNS, "setting_id") if c in table.columns]
    return _numeric(table, path, integers, [c for c in task.metric_names if c in table.columns])


def _numeric(table: pd.DataFrame, path: Path, integers, numbers) -> pd.DataFrame:
    """``table`` with ``integers`` as int64 and ``numbers`` as float; ReportError naming the file and the first bad cell."""
    table = table.copy()
    for column in (*integers, *numbers):
        raw = table[column]
        if isinstance(raw, pd.DataFrame):  # a name given to two columns
            raise ReportError(f"{path}: column {column!r} appears more than once; the file is corrupt.")
        values = pd.to_numeric(raw, errors="coerce").astype(float)
        if column in integers:
            bad = ~np.isfinite(values) | (values != values.round()) | (values.abs() > 2**53)
        else:
            bad = values.isna() & raw.notna() & ~raw.astype(str).str.lower().isin(("nan", "none", ""))
        if bad.any():
            row = int(np.argmax(bad.to_numpy()))
            kind = "an integer" if column in integers else "a number"
            raise ReportError(
                f"{path}: column {column!r} row {row} holds {raw.iloc[row]!r}, not {kind}; the file is corrupt."
            )
        table[column] = values.astype(np.int64) if column in integers else values
    return table


def _task(name, path: Path) -> Task:
    try:
        return get_task(name)
    except ConfigError as error:
        raise ReportError(f"{path}: {error}") from None


def _config(values: dict, path: Path, task: Task):
    """The task's config from stored values, checked by the config class itself."""
    try:
        return task.config_class.from_dict({k: v for k, v in values.items() if k not in ("seeds", "task")})
    except (TypeError, ValueError, KeyError, ConfigError) as error:
        raise ReportError(f"{path}: not a ppo-jax {task.name} config ({error}).") from None


def _load_run_dir(path: Path) -> tuple[Task, pd.DataFrame, dict, dict]:
    """A ``ppo-jax train`` / ``rlhf`` directory -> (task, table, {seed: config dict}, metadata)."""
    raw = _read_json(path / "config.json")
    if not isinstance(raw, dict):
        raise ReportError(f"{path / 'config.json'}: expected a JSON object of config fields.")
    task = _task(raw.get("task", DEFAULT_TASK), path / "config.json")
    cfg = _config(raw, path / "config.json", task)
    config = cfg.to_dict()
    metadata = _read_json(path / "metadata.json")
    if not isinstance(metadata, dict):
        raise ReportError(f"{path / 'metadata.json'}: expected a JSON object; the file is corrupt.")
    table = _read_table(path / "metrics.csv", task)
    table.insert(0, "env", task.env_of(cfg))
    evaluation = path / "evaluation.csv"
    if evaluation.is_file():
        episodes = _numeric(
            _read_table_plain(evaluation, ("seed", "policy", "return")), evaluation, ["seed"], ["return"]
        )
        means = episodes.groupby(["seed", "policy"])["return"].mean().unstack("policy")
        last = table.groupby("seed")["update"].transform("max") == table["update"]
        for policy in ("stochastic", "deterministic"):
            if policy in means:
                table[f"eval_return_{policy}"] = np.where(last, table["seed"].map(means[policy]), np.nan)
    configs = {int(seed): config for seed in table["seed"].unique()}
    pretrain_seed = metadata.get(PRETRAIN_SEED, 0) if task.shared_fields else 0  # ppo_jax.runs records it
    table.insert(table.columns.get_loc("seed"), PRETRAIN_SEED, int(pretrain_seed or 0))
    return task, table, configs, metadata


def _read_table_plain(path: Path, columns: tuple[str, ...]) -> pd.DataFrame:
    try:
        table = pd.read_csv(path)
    except Exception as error:
        raise ReportError(
            f"{path}: cannot be read as CSV ({type(error).__name__}: {error}); the file is corrupt."
        ) from None
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise ReportError(f"{path}: missing column(s) {missing}.")
    return table


def _load_sweep_dir(path: Path) -> tuple[Task, pd.DataFrame, dict, dict]:
    """A ``ppo-jax sweep`` directory -> (task, table, {(env, setting_id): config dict}, metadata)."""
    record = _read_json(path / "spec.json")
    spec = record.get("spec") if isinstance(record, dict) else None
    task = _task(spec.get("task", DEFAULT_TASK) if isinstance(spec, dict) else DEFAULT_TASK, path / "spec.json")
    metadata = _read_json(path / "metadata.json")
    if not isinstance(metadata, dict):
        raise ReportError(f"{path / 'metadata.json'}: expected a JSON object; the file is corrupt.")
    if not (path / "metrics.parquet").is_file() and (path / "chunks").is_dir():
        raise ReportError(
            f"{path / 'metrics.parquet'}: missing — the sweep has not finished; complete it with "
            f"`ppo-jax sweep {path / 'spec.yaml'} --out {path} --resume`."
        )
    table = _read_table(path / "metrics.parquet", task, required=("env", "setting_id"))
    if PRETRAIN_SEED not in table:  # no shared pretraining, or written before the column existed: the spec's seed
        pretrain = spec.get("pretrain") if isinstance(spec, dict) else None
        seed = pretrain.get("seed", 0) if isinstance(pretrain, dict) else 0
        table.insert(table.columns.get_loc("seed"), PRETRAIN_SEED, int(seed) if isinstance(seed, int) else 0)
    table = _numeric(table, path / "metrics.parquet", [PRETRAIN_SEED], [])
    try:
        base, env_base = record["spec"]["base"], record["spec"].get("env_base", {})
        configs = {}
        for setting in record["settings"]:
            values = {k: v for k, v in setting.items() if k not in ("setting_id", "env")}
            env = setting["env"]
            env_values = {task.env_field: env} if task.env_field else {}
            preset = values.pop(PRESET_AXIS, None)
            if preset is not None:  # a preset axis: its fields over base, the other axes over them
                before = _config({**base, **env_values}, path / "spec.json", task)
                base_of_setting = {**task.apply_preset(preset, before).to_dict(), **env_base.get(env, {})}
            else:
                base_of_setting = {**base, **env_base.get(env, {})}
            config = _config({**base_of_setting, **values, **env_values}, path / "spec.json", task).to_dict()
            configs[(env, int(setting["setting_id"]))] = {**config, PRESET_AXIS: preset} if preset else config
    except (KeyError, TypeError, AttributeError) as error:
        raise ReportError(f"{path / 'spec.json'}: not a ppo-jax sweep record (missing {error}).") from None
    return task, table, configs, metadata


def _label(values: dict) -> str:
    def show(v):
        if isinstance(v, float):
            return f"{v:g}"
        if isinstance(v, (list, tuple)):
            return "x".join(map(str, v))
        return str(v)

    return ", ".join(f"{k}={show(v)}" for k, v in values.items()) or "default"


def _check_files(path: Path) -> None:
    """Every file of a run or sweep directory read back first: ReportError naming a corrupt one (never skipped)."""
    from ppo_jax.errors import CorruptFileError
    from ppo_jax.storage.run_dir import check_run_dir
    from ppo_jax.sweep.sweep_dir import check_sweep_dir

    try:
        if (path / "spec.json").exists() and (path / "metrics.parquet").exists():
            check_sweep_dir(path)
        elif (path / "config.json").exists() and not (path / "spec.json").exists():
            check_run_dir(path)
    except CorruptFileError as error:
        raise ReportError(str(error)) from None
    except OSError as error:  # a file missing, or a directory where a file should be
        raise ReportError(
            f"{error.filename or path}: cannot be read ({error.strerror or error}); is {path} a complete "
            "ppo-jax run or sweep directory?"
        ) from None


RUN_FILES = (CONFIG_FILE, METADATA_FILE, METRICS_FILE, EVALUATION_FILE, PARAMS_FILE)
"""What a run directory holds (``ppo_jax.storage.run_dir``): one of them beside a missing config.json is a run's."""


def not_a_source(path: Path) -> str:
    """Why ``path`` (a directory with neither config.json nor spec.json) is no source, naming the file it lacks."""
    from ppo_jax.sweep.sweep_dir import CHUNK_DIR, LOG_FILE, PLAN_FILE, SPEC_JSON, SPEC_YAML, SUMMARY_FILE, TABLE_FILE

    writers = ", ".join(f"`ppo-jax {task.command} --out`" for task in TASKS.values())
    run_files = [name for name in RUN_FILES if (path / name).exists()]
    sweep_files = [
        name for name in (SPEC_YAML, PLAN_FILE, TABLE_FILE, SUMMARY_FILE, LOG_FILE, CHUNK_DIR) if (path / name).exists()
    ]
    if run_files and len(run_files) >= len(sweep_files):
        return (
            f"{path / CONFIG_FILE}: missing, so {path} is not a complete run directory (it holds "
            f"{', '.join(run_files)}); the report reads the task and config from {CONFIG_FILE}. Restore it from a "
            f"backup, or give run directories written by {writers}."
        )
    if sweep_files:
        return (
            f"{path / SPEC_JSON}: missing, so {path} is not a complete sweep directory (it holds "
            f"{', '.join(sweep_files)}); the report reads the settings from {SPEC_JSON}. Restore it from a backup, "
            "or give sweep directories written by `ppo-jax sweep SPEC.yaml --out`."
        )
    return (
        f"{path}: neither a run directory (no {CONFIG_FILE}) nor a sweep directory (no {SPEC_JSON}); give "
        f"directories written by {writers} or `ppo-jax sweep SPEC.yaml --out`."
    )


def load_sources(paths: list[Path]) -> Runs:
    """Every run of every directory in ``paths``; ReportError on a missing, corrupt or unknown directory."""
    if not paths:
        raise ReportError("give at least one run or sweep directory.")
    frames, provenance, tasks = [], [], {}
    for index, path in enumerate(paths):
        path = Path(path)
        if not path.is_dir():
            raise ReportError(f"{path}: no such directory; give ppo-jax run or sweep directories.")
        if (path / "spec.json").exists():
            kind, (task, table, configs, metadata) = "sweep", _load_sweep_dir(path)
            keys = list(zip(table["env"], table["setting_id"].astype(int), strict=True))
            unknown = sorted(set(keys) - set(configs))
            if unknown:
                raise ReportError(
                    f"{path / 'metrics.parquet'}: rows for (env, setting_id) {unknown[:3]} not in spec.json."
                )
            table = table.assign(_config=[configs[k] for k in keys])
        elif (path / "config.json").exists():
            kind, (task, table, configs, metadata) = "run", _load_run_dir(path)
            table = table.assign(_config=[configs[int(s)] for s in table["seed"]])
        else:
            raise ReportError(not_a_source(path))
        _check_files(path)  # after the readers' own messages: what they cannot see (a cut table, params)
        tasks.setdefault(task.name, path)
        if len(tasks) > 1:
            (first, first_path), (other, other_path) = list(tasks.items())[:2]
            raise ReportError(
                f"{other_path} is a {other} result and {first_path} a {first} one; a report compares "
                "runs of one task. Report them separately."
            )
        table = table.assign(source=index)
        frames.append(table)
        sweep = metadata.get("sweep")
        name = str((sweep.get("name") if isinstance(sweep, dict) else None) or path.name)
        spec_file = path / ("spec.yaml" if kind == "sweep" else "config.json")
        spec_text = spec_file.read_text(errors="replace") if spec_file.is_file() else None  # provenance only
        provenance.append({"path": str(path), "kind": kind, "name": name, "metadata": metadata, "spec": spec_text})
    table = pd.concat(frames, ignore_index=True)
    return _with_settings(table, provenance, task)


def _with_settings(table: pd.DataFrame, provenance: list[dict], task: Task) -> Runs:
    configs = table["_config"].tolist()
    fields = [f for f in dataclasses.fields(task.config_class) if f.name != task.env_field]
    fields = [PRESET_AXIS] + [f.name for f in fields]
    varying = []
    for field in fields:
        per_env: dict[str, set] = {}
        for env, config in zip(table["env"], configs, strict=True):
            per_env.setdefault(env, set()).add(json.dumps(config.get(field)))
        if any(len(v) > 1 for v in per_env.values()):
            varying.append(field)
    if PRESET_AXIS in varying:  # a preset axis: the fields each preset fixes are named by the preset
        by_preset: dict[str, list] = {}
        for config in configs:
            by_preset.setdefault(config.get(PRESET_AXIS), []).append(config)
        varying = [
            f
            for f in varying
            if f == PRESET_AXIS or any(len({json.dumps(c[f]) for c in group}) > 1 for group in by_preset.values())
        ]
    labels, settings, full = [], {}, {}
    for config in configs:
        values = {f: config.get(f) for f in varying}
        label = _label(values)
        settings.setdefault(label, values)
        full.setdefault(label, config)
        labels.append(label)
    table = table.drop(columns=["_config"]).assign(setting=labels)
    key = ["env", "setting", PRETRAIN_SEED, "seed", "update"]
    duplicated = table.duplicated(key, keep=False)
    if duplicated.any():
        row = table[duplicated].iloc[0]
        rows = table[duplicated & (table[key] == row[key]).all(axis=1)]
        paths = sorted({provenance[int(s)]["path"] for s in rows["source"]})
        where = f"twice in {paths[0]}" if len(paths) == 1 else f"in more than one input directory ({', '.join(paths)})"
        raise ReportError(
            f"run ({row['env']}, {row['setting']}, pretrain seed {row[PRETRAIN_SEED]}, seed {row['seed']}) has update {row['update']} {where}; give each run once."
        )
    eval_cols = [c for c in task.eval_names if c in table.columns]
    evals = (
        table.dropna(subset=eval_cols, how="all")[["source", "env", "setting", PRETRAIN_SEED, "seed", *eval_cols]]
        if eval_cols
        else pd.DataFrame(columns=["source", "env", "setting", PRETRAIN_SEED, "seed"])
    )
    curves = table.drop(columns=eval_cols)
    return Runs(curves.reset_index(drop=True), evals.reset_index(drop=True), settings, varying, provenance, task, full)


class SeedRun(NamedTuple):
    """One run of a report: its env, setting and seed, its curves in update order, the row of its first
    non-finite update (``first_divergence``; -1 if it did not diverge), and its pretraining seed."""

    env: str
    setting: str
    seed: int
    curves: pd.DataFrame
    divergence: int
    pretrain_seed: int = 0

    @property
    def identity(self) -> dict:
        """The columns that name the run in a per-run table: env, setting, pretrain_seed, seed, diverged."""
        keys = ("env", "setting", "pretrain_seed", "seed")
        return {**{key: getattr(self, key) for key in keys}, "diverged": self.diverged}

    @property
    def diverged(self) -> bool:
        return self.divergence >= 0


def each_run(runs: Runs) -> Iterator[SeedRun]:
    """Every run of ``runs`` in table order, with whether (and where) it diverged."""
    for (env, setting, model, seed), run in runs.curves.groupby(["env", "setting", PRETRAIN_SEED, "seed"], sort=False):
        run = run.sort_values("update")
        flags = divergence_flags(run)
        yield SeedRun(env, setting, int(seed), run, -1 if flags is None else int(first_divergence(flags)), int(model))
