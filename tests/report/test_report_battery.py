"""Bad-input battery for ``ppo-jax report``: run and sweep directories with random, truncated or mangled files.

Each case starts from a complete synthetic run directory (config.json, metadata.json, metrics.csv,
evaluation.csv) or sweep directory (spec.json, metadata.json, metrics.parquet, chunks/*.parquet, spec.yaml) and
replaces files with nothing, random bytes, a truncated copy, other JSON, a directory, or a table with columns
dropped, renamed or filled with junk (strings, NaN, inf, huge numbers), then runs ``ppo-jax report DIR --out
OUT`` in-process. It must be accepted or exit 2 with one ``error: ...`` line naming a path; never another
exception, never a compilation. Accepted means the report reached its analysis: the battery stops there
(``build._analyse`` patched to compute the final returns and normalized scores, the data-dependent steps that
can refuse, and raise ``ReachedTraining``), since a whole report takes seconds;
``test_the_unmangled_directories_report`` writes three whole ones (figures drawn, not saved).
"""

from __future__ import annotations

import io
import json
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ppo_jax.report.build
import ppo_jax.report.figures
from ppo_jax.cli import main
from ppo_jax.lm.config import RlhfConfig
from ppo_jax.report import scores
from ppo_jax.rl.config import PPOConfig
from ppo_jax.sweep.spec import load_spec
from ppo_jax.sweep.sweep_dir import spec_record
from tests import battery
from tests.battery import ReachedTraining

battery.warm_up()

UPDATES, SEEDS = 6, (0, 1)
SWEEP_SPEC = {
    "name": "battery",
    "envs": ["CartPole-v1", "Acrobot-v1"],
    "seeds": len(SEEDS),
    "grid": {"clip_eps": [0.1, 0.2]},
}


def metrics(seed: int, score: str = "episode_return") -> pd.DataFrame:
    updates = np.arange(UPDATES)
    return pd.DataFrame(
        {
            "seed": seed,
            "update": updates,
            "env_steps": (updates + 1) * 512,
            score: np.linspace(10.0, 100.0 + seed, UPDATES),
            "entropy": np.linspace(0.7, 0.3, UPDATES),
        }
    )


def valid_run(task: str) -> dict[str, object]:
    """name -> content (dict: JSON, DataFrame: table) of a complete run directory (UPDATES updates per seed)."""
    if task == "rlhf":
        cfg, score = RlhfConfig(num_updates=UPDATES).to_dict(), "true_score"
        table = pd.concat([metrics(s, score).assign(rm_score=0.5, kl=0.1) for s in SEEDS])
    else:
        cfg = PPOConfig(total_timesteps=UPDATES * 512, num_envs=4, num_steps=128).to_dict()
        table = pd.concat([metrics(s) for s in SEEDS])
    files = {
        "config.json": {"task": task, **cfg, "seeds": list(SEEDS)},
        "metadata.json": {"command_line": "ppo-jax train (synthetic)"},
        "metrics.csv": table,
    }
    if task == "ppo":
        files["evaluation.csv"] = pd.DataFrame(
            [
                {"seed": s, "policy": p, "episode": e, "return": 10.0 * e, "length": 5}
                for s in SEEDS
                for p in ("stochastic", "deterministic")
                for e in range(2)
            ]
        )
    return files


def valid_sweep() -> dict[str, object]:
    spec = load_spec(SWEEP_SPEC)
    frames = [
        metrics(seed).assign(env=s.env, setting_id=s.setting_id, clip_eps=s.values["clip_eps"])
        for s in spec.settings
        for seed in SEEDS
    ]
    table = pd.concat(frames, ignore_index=True)
    half = len(table) // 2
    return {
        "spec.json": spec_record(spec),
        "metadata.json": {"sweep": {"name": "battery"}},
        "metrics.parquet": table,
        "plan.json": {"chunks": [{"id": "g000-c00000"}, {"id": "g000-c00001"}]},
        "spec.yaml": "grid:\n  clip_eps: [0.1, 0.2]\n",
        "chunks/g000-c00000.parquet": table.iloc[:half],
        "chunks/g000-c00001.parquet": table.iloc[half:],
    }


def encode(name: str, content) -> bytes:
    if isinstance(content, pd.DataFrame):
        if name.endswith(".parquet"):
            buffer = io.BytesIO()
            try:
                content.to_parquet(buffer)
            except Exception:  # noqa: BLE001 -- mixed types or repeated names Parquet cannot hold: a corrupt file then
                return content.to_csv(index=False).encode()
            return buffer.getvalue()
        return content.to_csv(index=False).encode()
    if isinstance(content, (dict, list)) or not isinstance(content, (str, bytes)):
        return json.dumps(content, allow_nan=True, default=str).encode()
    return content.encode() if isinstance(content, str) else content


json_junk = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**70), 2**70),
        st.floats(allow_nan=True),
        st.text(max_size=8),
        st.sampled_from(["ppo", "rlhf", "CartPole-v1", "clip", [0, 1], {"name": "x"}]),
    ),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
cell_junk = st.one_of(
    st.sampled_from(["abc", "", "nan", "inf", "-inf", "1e400", 2**70, np.nan, np.inf, -np.inf, -1, 10**9, True, None]),
    st.floats(allow_nan=True),
    st.text(max_size=4),
)


@st.composite
def mangled(draw, name: str, content):
    """``content`` as it is, or broken one of many ways (None: the file is missing; "DIR": a directory)."""
    how = draw(st.sampled_from(["keep", "keep", "keep", "missing", "bytes", "truncated", "json", "dir", "edit"]))
    if how == "keep":
        return content
    if how == "missing":
        return None
    if how == "dir":
        return "DIR"
    if how == "bytes":
        return draw(st.binary(max_size=64))
    if how == "truncated":
        data = encode(name, content)
        return data[: draw(st.integers(0, max(0, len(data) - 1)))]
    if how == "json":
        return json.dumps(draw(json_junk), allow_nan=True).encode()
    if isinstance(content, dict):  # a key set to junk, or dropped
        edited, key = (
            dict(content),
            draw(st.sampled_from(sorted(content) + ["task", "env", "seeds", "spec", "settings"])),
        )
        if draw(st.booleans()):
            edited.pop(key, None)
        else:
            edited[key] = draw(json_junk)
        return edited
    if isinstance(content, pd.DataFrame):  # a column dropped, renamed or filled with junk; or no rows
        table, column = content.copy(), draw(st.sampled_from(list(content.columns)))
        edit = draw(st.sampled_from(["drop", "rename", "junk", "cell", "empty", "duplicate"]))
        if edit == "drop":
            return table.drop(columns=[column])
        if edit == "rename":
            return table.rename(columns={column: draw(st.sampled_from(["", "x", "seed", "update", "episode_return"]))})
        if edit == "empty":
            return table.iloc[:0]
        if edit == "duplicate":
            return pd.concat([table, table.iloc[:3]])
        table[column] = table[column].astype(object)
        rows = range(len(table)) if edit == "junk" else [draw(st.integers(0, len(table) - 1))]
        value = draw(cell_junk)
        for row in rows:
            table.iat[row, table.columns.get_loc(column)] = value
        return table
    return draw(st.binary(max_size=32))


@st.composite
def directories(draw):
    kind = draw(st.sampled_from(["ppo", "ppo", "rlhf", "sweep", "sweep"]))
    files = valid_sweep() if kind == "sweep" else valid_run(kind)
    return kind, {name: draw(mangled(name, content)) for name, content in files.items()}


def write(root: Path, files: dict) -> None:
    root.mkdir()
    for name, content in files.items():
        if content is None:
            continue
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, str) and content == "DIR":
            path.mkdir()
        else:
            path.write_bytes(encode(name, content))


@pytest.fixture(scope="module", autouse=True)
def unsaved_figures():
    def close(fig, out, name):
        plt.close(fig)
        return []

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ppo_jax.report.figures, "save", close)
        yield


def _data_checks(runs, out, *, last_percent, references, normalize, **kwargs):
    """The start of the analysis: final returns and normalized scores (what can refuse the data), then stop."""
    finals = scores.final_returns(runs, last_percent)
    finals["score"] = scores.normalize(finals, scores.normalizers(finals, references, normalize))
    raise ReachedTraining("analysis")


def run_report(kind: str, files: dict, *, whole: bool = False) -> str:
    """Report on ``files`` written as a directory; the outcome's name. ``whole``: the whole report, not just its start."""
    with tempfile.TemporaryDirectory() as tmp:
        root, out = Path(tmp) / "in", Path(tmp) / "out"
        write(root, files)
        with battery.captured() as (_, err), battery.watching(), pytest.MonkeyPatch.context() as mp:
            if not whole:
                mp.setattr(ppo_jax.report.build, "_analyse", _data_checks)
            try:
                status = main(["report", str(root), "--out", str(out), "--reps", "100"])
            except ReachedTraining:
                return f"{kind}: accepted"
            except SystemExit as exit:  # tyro: never here, every flag is valid
                raise AssertionError(f"exit {exit.code}: {err.getvalue()}") from None
        stderr = err.getvalue()
        if status == 0:
            assert (out / "report.json").is_file()
            return f"{kind}: reported"
        assert status == 2, f"exit status {status}: {stderr}"
        assert stderr.startswith("error: "), stderr
        battery.check_message(stderr)
        assert str(root) in stderr, f"the message names no input path: {stderr!r}"
        assert not out.exists(), "a refused report left its output directory"
        return f"{kind}: refused"


@battery.battery_settings(max_examples=250)
@given(directories())
def test_mangled_directories_report_or_give_an_error_naming_the_file(case):
    kind, files = case
    battery.count("report battery: mangled directories", run_report(kind, files))


def test_the_unmangled_directories_report():
    assert run_report("ppo", valid_run("ppo"), whole=True) == "ppo: reported"
    assert run_report("rlhf", valid_run("rlhf"), whole=True) == "rlhf: reported"
    assert run_report("sweep", valid_sweep(), whole=True) == "sweep: reported"
