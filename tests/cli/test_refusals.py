"""What the command line refuses the same way everywhere (issue 43): ignored flags, float32's range, --out, report inputs.

Every case runs ``ppo_jax.cli.main`` in-process and fails before anything compiles (``run_task`` is replaced by a
recorder, so an accepted command only says which config it would train). Expectations are written out here: the
flag as typed, the value as typed, the file that is missing, the commands that write run directories.
"""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import pytest

import ppo_jax.cli.train
from ppo_jax.cli import main
from ppo_jax.errors import ConfigError
from ppo_jax.lm.config import LmConfig, RlhfConfig
from ppo_jax.rl.config import PPOConfig
from ppo_jax.sweep.spec import from_dict
from tests.helpers import snapshot


@pytest.fixture
def trained(monkeypatch):
    """The configs the commands would train: ``run_task`` records its config and returns 0 instead of training."""
    configs = []

    def record(task, cfg, options, **kwargs):
        configs.append(cfg)
        return 0

    monkeypatch.setattr(ppo_jax.cli.train, "run_task", record)
    return configs


def refusal(argv: list[str], capsys) -> str:
    """The one-line message of a command that must be refused with exit status 2 (and no warning on the way)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # NumPy's "overflow encountered in cast" would be an exception here
        status = main(argv)
    err = capsys.readouterr().err
    assert status == 2, f"{argv}: exit {status}, stderr {err!r}"
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    return err


# ----------------------------------------------------------------------------- flags a switch ignores


def test_a_typed_flag_the_config_ignores_is_refused_with_the_sweeps_words(trained, capsys):
    err = refusal(["lm", "--kl-mode", "none", "--beta", "0.5"], capsys)
    match = re.search(
        r"error: --beta is ignored because (.+)\. Drop --beta, or turn on the switch that uses it\.$", err
    )
    assert match, err
    why = match.group(1)
    assert "kl_mode" in why  # the reason names the switch that turns beta off
    with pytest.raises(ConfigError) as sweep:  # the same combination as a sweep axis: refused in the same words
        from_dict({"task": "lm", "base": {"kl_mode": "none"}, "grid": {"beta": [0.1, 0.5]}})
    assert f"beta is ignored because {why}" in str(sweep.value)
    assert trained == []


def test_a_flag_that_sets_two_ignored_fields_is_named_once(trained, capsys):
    err = refusal(["lm", "--preset", "rloo", "--clip-eps", "0.1"], capsys)
    # rloo is plain policy gradient: no ratio, so no clip range (--clip-eps sets clip_eps_low and clip_eps_high)
    assert err.startswith("error: --clip-eps is ignored because") and "policy_loss" in err
    assert err.count("--clip-eps") == 2 and "--clip-eps-low" not in err and trained == []


def test_flags_are_named_as_typed_and_grouped_by_reason(monkeypatch, trained, capsys):
    inert = {"digits": "reason one", "scratchpad": "reason one", "clip_vloss": "reason two"}
    monkeypatch.setattr(LmConfig, "inert_fields", lambda self: inert)
    err = refusal(["lm", "--scratchpad", "--lr", "0.01", "--digits", "3", "--no-clip-vloss"], capsys)
    assert err == (
        "error: --digits and --scratchpad are ignored because reason one; --no-clip-vloss is ignored because "
        "reason two. Drop --digits, --scratchpad and --no-clip-vloss, or turn on the switch that uses them.\n"
    )


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["train", "--kl-beta", "0.5"], "--kl-beta"),  # objective clip has no KL penalty
        (
            ["train", "--objective", "kl_fixed", "--kl-beta", "0.5", "--no-clip-vloss", "--vf-clip-eps", "0.3"],
            "--vf-clip-eps",
        ),
        (["train", "--kl-target=0.02"], "--kl-target"),
        (["rlhf", "--eval-prompts", "3"], "--eval-prompts"),  # rlhf has no final evaluation
    ],
)
def test_train_and_rlhf_refuse_ignored_flags_too(argv, flag, trained, capsys):
    err = refusal(argv, capsys)
    assert f"{flag} is ignored because" in err and trained == []


def test_values_the_user_did_not_type_are_not_refused(trained, capsys):
    """A preset's or a default's value for an ignored field is fine; so is a flag whose switch is turned on."""
    cases = [
        (["lm", "--preset", "rloo"], {}),  # rloo keeps its clip_eps_low/high values: ignored, but not typed
        (["lm", "--kl-mode", "none"], {}),  # beta keeps grpo's value, ignored, not typed
        (["lm", "--kl-mode", "loss", "--beta", "0.5"], {"beta": 0.5}),
        (["lm", "--preset", "ppo_rlhf", "--vf-coef", "0.25", "--clip-eps", "0.125"], {"clip_eps_high": 0.125}),
        (["train", "--objective", "kl_fixed", "--kl-beta", "0.5"], {"kl_beta": 0.5}),
        (["train", "--clip-eps", "0.125"], {"clip_eps": 0.125}),  # train's clip_eps is a field, not an alias
        (["rlhf", "--beta", "0.25"], {"beta": 0.25}),
    ]
    for argv, expected in cases:
        trained.clear()
        assert main(argv) == 0, (argv, capsys.readouterr().err)
        assert len(trained) == 1 and {k: float(getattr(trained[0], k)) for k in expected} == expected, argv


def test_what_is_ignored_comes_from_the_configs_inert_fields(monkeypatch, trained, capsys):
    """No field name is spelled in the CLI: a field the config declares inert, with its reason, is what is refused."""
    monkeypatch.setattr(LmConfig, "inert_fields", lambda self: {"lr": "a test declared it inert"})
    err = refusal(["lm", "--lr", "0.001"], capsys)
    assert "--lr is ignored because a test declared it inert" in err
    assert main(["lm", "--kl-mode", "none", "--beta", "0.5"]) == 0  # beta is no longer declared inert
    monkeypatch.setattr(PPOConfig, "inert_fields", lambda self: {"gamma": "another reason"})
    assert "--gamma is ignored because another reason" in refusal(["train", "--gamma", "0.9"], capsys)


# ----------------------------------------------------------------------------- float32's range


@pytest.mark.parametrize(
    "argv, typed, what",
    [
        (["lm", "--lr", "1e-50"], "1e-50", "underflows float32"),
        (["lm", "--beta", "1e40"], "1e+40", "overflows float32"),
        (["train", "--lr=-1e-45"], "-1e-45", "underflows float32"),
        (["train", "--ent-coef", "3.5e38"], "3.5e+38", "overflows float32"),
        (["rlhf", "--clip-eps", "1e39"], "1e+39", "overflows float32"),
        (["rlhf", "--vf-coef", "1" + "0" * 41], "1e+41", "overflows float32"),  # a float flag: read as a float
    ],
)
def test_a_value_float32_cannot_hold_is_refused_as_typed(argv, typed, what, trained, capsys):
    err = refusal(argv, capsys)
    assert f" {typed} {what}" in err, err
    assert "got 0.0" not in err and "got inf" not in err and "got [inf]" not in err and trained == []


def test_a_sweep_refuses_a_value_float32_cannot_hold_where_it_is_written():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ConfigError, match=r"grid\.lr\[1\]\): lr 1e-50 underflows float32"):
            from_dict({"task": "lm", "grid": {"lr": [1e-3, 1e-50]}})
        with pytest.raises(ConfigError, match=r"base\.kl_beta\): kl_beta 1e\+40 overflows float32"):
            from_dict({"base": {"kl_beta": 1e40}})


# ----------------------------------------------------------------------------- --out


def test_force_is_not_advised_for_a_directory_it_would_not_replace(tmp_path, capsys):
    keep = tmp_path / "keep"
    keep.mkdir()
    (keep / "notes.txt").write_text("mine")
    for argv in (["lm", "--out", str(keep)], ["train", "--out", str(keep)], ["lm", "--out", str(keep), "--force"]):
        err = refusal(argv, capsys)
        assert "not a ppo-jax run directory" in err and "Choose another --out" in err and "pass --force" not in err
    spec = tmp_path / "spec.yaml"
    spec.write_text("base: {total_timesteps: 1024, num_envs: 2, num_steps: 64}\nseeds: 1\n")
    err = refusal(["sweep", str(spec), "--out", str(keep)], capsys)
    assert "Choose another --out" in err and "pass --force" not in err
    assert snapshot(keep) == {"notes.txt": b"mine"}


def test_force_is_advised_for_a_run_directory_it_would_replace(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"task": "ppo", **PPOConfig().to_dict(), "seeds": [0]}))
    (run / "metadata.json").write_text("{}")
    before = snapshot(run)
    assert "pass --force to replace it" in refusal(["train", "--out", str(run)], capsys)
    assert snapshot(run) == before


@pytest.mark.parametrize(
    "command",
    [["train"], ["lm"], ["rlhf"], ["sweep", "SPEC"], ["report", "RUN"]],
    ids=["train", "lm", "rlhf", "sweep", "report"],
)
@pytest.mark.parametrize("empty", [["--out", ""], ["--out="]], ids=["space", "equals"])
def test_an_empty_out_is_refused_not_taken_as_the_current_directory(command, empty, tmp_path, monkeypatch, capsys):
    (tmp_path / "spec.yaml").write_text("base: {total_timesteps: 1024, num_envs: 2, num_steps: 64}\nseeds: 1\n")
    (tmp_path / "run").mkdir()
    monkeypatch.chdir(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    argv = [{"SPEC": "spec.yaml", "RUN": "run"}.get(a, a) for a in command] + empty
    err = refusal(argv, capsys)
    assert "--out is empty" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == before and not any((tmp_path / "run").iterdir())


# ----------------------------------------------------------------------------- report inputs


def _run_dir(path: Path) -> Path:
    """A run directory's files (what ppo-jax train --out writes), without training."""
    path.mkdir()
    (path / "config.json").write_text(json.dumps({"task": "ppo", **PPOConfig().to_dict(), "seeds": [0]}))
    (path / "metadata.json").write_text("{}")
    (path / "metrics.csv").write_text("seed,update,env_steps,episode_return\n0,0,512,1.0\n")
    return path


def test_report_names_the_missing_config_json_and_every_command_that_writes_a_run(tmp_path, capsys):
    run = _run_dir(tmp_path / "run")
    (run / "config.json").unlink()
    err = refusal(["report", str(run), "--out", str(tmp_path / "report")], capsys)
    assert f"{run / 'config.json'}: missing" in err and "neither" not in err
    for command in ("train", "lm", "rlhf"):
        assert f"`ppo-jax {command} --out`" in err
    assert not (tmp_path / "report").exists()


def test_report_names_the_missing_spec_json_of_a_sweep(tmp_path, capsys):
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    for name in ("spec.yaml", "plan.json", "metadata.json", "summary.csv", "sweep.log"):
        (sweep / name).write_text("")
    err = refusal(["report", str(sweep), "--out", str(tmp_path / "report")], capsys)
    assert f"{sweep / 'spec.json'}: missing" in err and "`ppo-jax sweep" in err


def test_report_on_an_unrelated_directory_names_every_writer(tmp_path, capsys):
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    err = refusal(["report", str(other), "--out", str(tmp_path / "report")], capsys)
    assert "neither a run directory (no config.json) nor a sweep directory (no spec.json)" in err
    for command in ("train", "lm", "rlhf", "sweep"):
        assert f"`ppo-jax {command} " in err


def test_every_float32_leaf_of_rlhf_refuses_values_beyond_float32():
    """RlhfConfig is an LmConfig: checked like every config (tests/test_config_fields.py goes field by field)."""
    with pytest.raises(ConfigError, match="beta 1e-45 underflows float32"):
        RlhfConfig(beta=1e-45)
