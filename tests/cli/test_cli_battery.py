"""Bad-input battery for the command line: random argv of ``ppo-jax train / rlhf / sweep / report / envs``.

Argv lists are built from the real flags (read off the subcommands' dataclasses, so a new field is covered
the day it appears) with values of every kind: wrong types, negatives, huge numbers, NaN, empty strings,
``--flag=value`` forms, repeated and unknown flags. ``ppo_jax.cli.main(argv)`` runs in-process with the first
step of training, sweeping and reporting patched to raise ``tests.battery.ReachedTraining``: an argv that gets
there was accepted. Anything else must end in exit status 2 (or 1 for an unwritable path) with a one-line
``error: ...`` on stderr, or tyro's own usage error (exit 2); never a traceback, never a compilation.
Paths are never random: every path argument is one of the files and directories made here.
"""

from __future__ import annotations

import dataclasses
import importlib
import itertools
import json
import shutil
import signal
import sys
import tempfile
import typing
from pathlib import Path

import jax
import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ppo_jax.report.build
import ppo_jax.report.scores
import ppo_jax.sweep
from ppo_jax.cli import main
from ppo_jax.cli.report import Report
from ppo_jax.cli.sweep import Sweep
from ppo_jax.cli.train import Rlhf, Train
from ppo_jax.config_fields import field_names
from ppo_jax.lm.config import RlhfConfig
from ppo_jax.rl.config import PPOConfig
from ppo_jax.rl.task import PPO
from ppo_jax.sweep.spec_values import field_kind
from tests import battery
from tests.battery import ReachedTraining

battery.warm_up()

TMP = Path(tempfile.mkdtemp(prefix="ppo_jax_cli_battery_"))
PLACES = {  # what a path argument may be: "@name" in an argv is replaced by TMP / name
    "@spec_ok": "a valid spec",
    "@spec_bad": "a spec with an unknown field",
    "@spec_missing": "no such file",
    "@run": "a complete run directory",
    "@empty": "an empty directory",
    "@keep": "a directory with someone's file",
    "@file": "a plain file",
    "@refs_ok": "a reference-scores YAML",
    "@refs_bad": "a YAML that is not reference scores",
    "@fresh": "a new path (a fresh one each time)",
}


def _make_places() -> None:
    (TMP / "spec_ok").write_text(
        "base: {total_timesteps: 1024, num_envs: 2, num_steps: 64, num_minibatches: 2}\n"
        "envs: [CartPole-v1, Acrobot-v1]\ngrid:\n  clip_eps: [0.1, 0.2]\nseeds: 2\n"
    )
    (TMP / "spec_bad").write_text("grid:\n  clip_epsilon: [0.1]\n")
    run = TMP / "run"
    run.mkdir()
    cfg = PPOConfig(total_timesteps=10 * 512, num_envs=4, num_steps=128)  # 10 updates, as metrics.csv has
    (run / "config.json").write_text(json.dumps({"task": "ppo", **cfg.to_dict(), "seeds": [0, 1]}))
    (run / "metadata.json").write_text(json.dumps({"command_line": "ppo-jax train (synthetic)"}))
    updates = np.arange(10)
    pd.DataFrame(
        {
            "seed": np.repeat([0, 1], 10),
            "update": np.tile(updates, 2),
            "env_steps": np.tile((updates + 1) * 512, 2),
            PPO.score: np.linspace(10.0, 200.0, 20),
        }
    ).to_csv(run / "metrics.csv", index=False)
    (TMP / "empty").mkdir()
    (TMP / "keep").mkdir()
    (TMP / "keep" / "notes.txt").write_text("mine")
    (TMP / "file").write_text("not a directory")
    (TMP / "refs_ok").write_text("CartPole-v1: {random: 22.0, best: 500.0, source: test}\n")
    (TMP / "refs_bad").write_text("- [1, 2\n")


_fresh = itertools.count()


def resolve(argv: list[str]) -> list[str]:
    """The argv with each "@place" (also inside "--flag=@place") replaced by its path."""
    out = []
    for arg in argv:
        for place in PLACES:
            if place in arg:
                name = f"fresh{next(_fresh)}" if place == "@fresh" else place[1:]
                arg = arg.replace(place, str(TMP / name))
        out.append(arg)
    return out


# ----------------------------------------------------------------------------- flags and values

POOLS = {  # values of each kind, right and wrong; every flag also gets JUNK now and then
    "float": [
        "0.1",
        "0.2",
        "1e-3",
        "2.5e-4",
        "0.99",
        "1",
        "0",
        "-0.5",
        "1.5",
        "3",
        "nan",
        "inf",
        "-inf",
        "1e999",
        "1e-50",
    ],
    "int": ["1", "2", "4", "8", "64", "128", "1024", "0", "-1", "3", str(2**31), str(2**63), str(10**30), "1.5", "5e5"],
    "str": [
        "CartPole-v1",
        "Acrobot-v1",
        "Pendulum-v1",
        "brax/ant",
        "CartPole-v2",
        "clip",
        "kl_fixed",
        "kl_adaptive",
        "dual_clip",
        "tanh",
        "relu",
        "linear",
        "constant",
        "gaussian",
        "state",
        "orthogonal",
        "learned",
        "programmatic",
        "gae",
        "broadcast",
        "spring",
        "mjx",
        "",
    ],
    "sizes": ["64", "32", "0", "-1", "1e3", str(2**40)],
    "path": ["@fresh", "@fresh", "@keep", "@file", "@empty", "@refs_ok", "@refs_bad", "none", ""],
    "every": ["1", "10", "5%", "0%", "150%", "-5%", "%", "0", "-3", "abc", ""],  # --checkpoint-every
    "budget": ["8GiB", "500MB", "1KB", "0", "-1GiB", "lots", ""],
    "part": ["0/2", "1/2", "2/2", "1/0", "-1/2", "a/b", "1"],
    "log": ["tensorboard", "wandb", "csv"],
    "preset": ["mujoco", "brax", "none", "humanoid"],
    "normalize": ["reference", "best-setting", "best"],
    "percent": ["5", "10", "100", "0", "-5", "150", "nan", "inf", "1e-9"],
    "label": ["default", "clip_eps=0.1", "", "x"],
    "envs": ["CartPole-v1", "Acrobot-v1", "Pendulum-v1", "CartPole-v2"],
}
RUN_KINDS = {  # the flags besides the config fields: which pool their values come from
    "seeds": "int",
    "seed": "int",
    "out": "path",
    "checkpoint_every": "every",
    "keep_checkpoints": "int",
    "log": "log",
    "eval_episodes": "int",
    "preset": "preset",
    "pretrain_seed": "int",
    "envs": "envs",
    "chunk_size": "int",
    "memory_budget": "budget",
    "part": "part",
    "cache_dir": "path",
    "last_percent": "percent",
    "reps": "int",
    "baseline": "label",
    "reference_scores": "path",
    "normalize": "normalize",
}
JUNK = [
    "",
    "0",
    "1",
    "-1",
    "2",
    "3",
    "4",
    "7",
    "64",
    "1024",
    "1e-3",
    "0.5",
    "1.5",
    "-0.2",
    "nan",
    "inf",
    "-inf",
    "1e999",
    str(2**31),
    str(2**63),
    str(10**30),
    "abc",
    "True",
    "false",
    "None",
    "CartPole-v1",
    "Pendulum-v1",
    "Acrobot-v1",
    "brax/ant",
    "CartPole-v2",
    "clip",
    "kl_adaptive",
    "tanh",
    "relu",
    "linear",
    "learned",
    "gae",
    "mujoco",
    "brax",
    "none",
    "reference",
    "best-setting",
    "5%",
    "0%",
    "150%",
    "-5%",
    "%",
    "10",
    "tensorboard",
    "wandb",
    "8GiB",
    "500MB",
    "lots",
    "0/2",
    "1/2",
    "2/2",
    "1/0",
    "-",
    "--",
    "default",
    "clip_eps=0.1",
]


def _flags(cls) -> dict[str, str]:
    """``--flag`` -> the kind of value it takes, for every field of a subcommand's dataclass (configs flattened)."""
    flags = {}
    for field in dataclasses.fields(cls):
        if field.name in ("config", "spec", "dirs"):
            continue
        switch_only = "FlagCreatePairsOff" in str(field.type) or str(field.type) == "Switch"  # no --no-flag
        flags[field.name] = RUN_KINDS.get(field.name, "switch" if switch_only else "bool")  # not listed: a flag
    config = {Train: PPOConfig, Rlhf: RlhfConfig}.get(cls)
    if config is not None:
        hints = typing.get_type_hints(config)
        for name in field_names(config):
            flags[name] = field_kind(config, name)
            if typing.get_origin(hints[name]) is typing.Literal:  # activation, objective, ...: its choices
                flags[name] = f"choice:{name}"
                POOLS[flags[name]] = [*typing.get_args(hints[name]), "clip", "x"]
            elif name == "env":
                flags[name] = "envs"
    out = {}
    for name, kind in flags.items():
        flag = "--" + name.replace("_", "-")
        out[flag] = kind
        if kind in ("bool", "switch"):
            out[flag] = "none"
        if kind == "bool":
            out["--no-" + name.replace("_", "-")] = "none"
    return out


FLAGS = {"train": _flags(Train), "rlhf": _flags(Rlhf), "sweep": _flags(Sweep), "report": _flags(Report), "envs": {}}
JUNK_FLAGS = ["--bogus", "--lr-", "-x", "--", "--no-", "--env-id", "--clip_eps", "--seeds=", "--help-me", "-"]


junk_value = st.sampled_from(JUNK) | st.text(max_size=6).filter(lambda s: not s.startswith("-h") and "\x00" not in s)


@st.composite
def values_for(draw, kind: str):
    """The values after a flag of this kind: mostly one of its pool; now and then none, several or junk."""
    roll = draw(st.integers(0, 19))
    one = junk_value if roll < 2 else st.sampled_from(POOLS.get(kind, POOLS["str"]))
    if kind in ("none", "switch"):
        return [] if roll >= 2 else draw(st.lists(one, max_size=1))
    if kind in ("sizes", "log", "envs"):  # takes several
        return draw(st.lists(one, max_size=3))
    if roll == 2:
        return draw(st.lists(one, max_size=3))
    return [draw(one)]


@st.composite
def argvs(draw):
    command = draw(st.sampled_from(["train"] * 4 + ["rlhf"] * 2 + ["sweep"] * 3 + ["report"] * 3 + ["envs"]))
    argv = [command]
    if command == "sweep" and draw(st.integers(0, 9)):
        argv.append(draw(st.sampled_from(["@spec_ok", "@spec_ok", "@spec_bad", "@spec_missing", "@empty"])))
    if command == "report":
        argv += draw(st.lists(st.sampled_from(["@run", "@run", "@empty", "@spec_missing", "@file"]), max_size=2))
        if draw(st.integers(0, 4)):
            argv += ["--out", "@fresh"]
    flags = FLAGS.get(command, {})
    for _ in range(draw(st.integers(0, 4))):
        junk_flag = not flags or not draw(st.integers(0, 9))
        flag = draw(st.sampled_from(JUNK_FLAGS) if junk_flag else st.sampled_from(sorted(flags)))
        values = draw(values_for(flags.get(flag, "str")))
        if len(values) == 1 and draw(st.booleans()):
            argv.append(f"{flag}={values[0]}")
        else:
            argv += [flag, *values]
    return argv


# ----------------------------------------------------------------------------- the patches


STOPS = [  # (module, function): the first steps that compile, pretrain or start writing results
    ("ppo_jax.segments", "segment_length", True),  # run_task: asked once everything is validated, before any jit
    ("ppo_jax.segments", "compile_segments", True),
    ("ppo_jax.sweep.program", "compile_program", True),
    ("ppo_jax.sweep.program", "fit_program", True),
    ("ppo_jax.sweep.program", "prepare_shared_once", False),
    ("ppo_jax.sweep.segmented", "run_chunk_in_segments", False),
    ("ppo_jax.storage.provenance", "collect_metadata", True),  # a sweep directory is about to be created
]
"""``required``: the battery fails if the function is gone (a rename must move the patch, not silently skip it)."""


def _patch_everywhere(mp: pytest.MonkeyPatch, module: str, name: str, replacement) -> bool:
    """Replace ``module.name`` and every ``from module import name`` copy in a loaded ppo_jax module."""
    original = getattr(importlib.import_module(module), name, None)
    if original is None:
        return False
    for loaded in [m for n, m in sys.modules.items() if n.startswith("ppo_jax") and m is not None]:
        for attr, value in list(vars(loaded).items()):
            if value is original:
                mp.setattr(loaded, attr, replacement)
    return True


@pytest.fixture(scope="module", autouse=True)
def patched():
    """Every first step of training, sweeping and report analysis raises ReachedTraining; SIGTERM/SIGINT restored."""
    _make_places()

    def reached(what):
        def stop(*args, **kwargs):
            raise ReachedTraining(what)

        return stop

    def analyse(runs, out, *, last_percent, **kwargs):  # the report's one check made while analysing
        ppo_jax.report.scores.final_returns(runs, last_percent)
        raise ReachedTraining("report")

    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PPO_JAX_CACHE_DIR", "none")
        for module, name, required in STOPS:
            assert _patch_everywhere(mp, module, name, reached(name)) or not required, f"{module}.{name} is gone"
        mp.setattr(jax.distributed, "initialize", lambda *a, **k: None)  # --distributed: no cluster here
        mp.setattr(ppo_jax.report.build, "_analyse", analyse)
        yield
    for s, handler in handlers.items():
        signal.signal(s, handler)
    shutil.rmtree(TMP, ignore_errors=True)


# ----------------------------------------------------------------------------- the battery


def run_cli(argv: list[str]) -> str:
    """Run ``main(argv)``; the outcome's name, after checking it keeps the rules."""
    with battery.captured() as (out, err), battery.watching():
        try:
            status = main(resolve(argv))
        except ReachedTraining:
            return f"accepted ({argv[0]})"
        except SystemExit as exit:  # tyro: a flag it cannot parse (its own boxed usage message)
            assert exit.code not in (0, None), f"{argv}: exit 0 without running"
            assert "Traceback" not in err.getvalue(), err.getvalue()
            return "refused by tyro"
    stderr = err.getvalue()
    if status == 0:
        if argv[0] == "sweep" and "--dry-run" in argv:  # with the chunk size known, a dry run compiles nothing
            assert "nothing was run (dry run)" in out.getvalue(), out.getvalue()
            return "dry run planned"
        assert argv[0] == "envs", f"{argv}: exit 0 without running"
        return "envs listed"
    assert status in (1, 2), f"{argv}: exit status {status}\n{stderr}"
    assert stderr.startswith("error: "), f"{argv}: {stderr!r}"
    battery.check_message(stderr)
    return "refused (exit 2)" if status == 2 else "refused (exit 1)"


@battery.battery_settings(max_examples=250)
@given(argvs())
def test_random_argv_is_accepted_or_refused_in_one_line(argv):
    battery.count("CLI battery: random argv", run_cli(argv))


def test_the_patches_stop_valid_commands_before_they_compile():
    """Valid commands reach the patched first step (so a passing battery did exercise acceptance)."""
    cases = [
        (["train", "--total-timesteps", "1024", "--num-envs", "2"], "accepted (train)"),
        (["rlhf", "--num-updates", "2"], "accepted (rlhf)"),
        (["sweep", "@spec_ok", "--out", "@fresh"], "accepted (sweep)"),
        (["sweep", "@spec_ok", "--dry-run"], "accepted (sweep)"),  # compiles to read the memory estimate
        (["sweep", "@spec_ok", "--dry-run", "--chunk-size", "2"], "dry run planned"),
        (["report", "@run", "--out", "@fresh"], "accepted (report)"),
        (["envs"], "envs listed"),
        (["train", "--env", "CartPole-v2"], "refused (exit 2)"),
        (["train", "--seeds", str(10**9)], "refused (exit 2)"),
        (["report", "@run", "--out", "@fresh", "--last-percent", "0"], "refused (exit 2)"),
        (["train", "--lr", "abc"], "refused by tyro"),
        (["trian"], "refused by tyro"),
        ([""], "refused by tyro"),
    ]
    for argv, expected in cases:
        assert run_cli(argv) == expected, argv


def test_distributed_without_a_cluster_is_refused_in_one_line(monkeypatch):
    """jax.distributed.initialize() outside a cluster raises ValueError (as JAX 0.10 does): exit 2, not a traceback."""

    def no_cluster(*args, **kwargs):
        raise ValueError("coordinator_address should be defined.")

    monkeypatch.setattr(jax.distributed, "initialize", no_cluster)
    with battery.captured() as (_, err):
        assert main(resolve(["sweep", "@spec_ok", "--out", "@fresh", "--distributed"])) == 2
    assert err.getvalue().startswith("error: --distributed: ") and "drop --distributed" in err.getvalue()
    battery.check_message(err.getvalue())
