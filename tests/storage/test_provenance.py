from ppo_jax.storage import provenance


def test_metadata_records_the_environment_variables_that_change_speed_or_results(monkeypatch):
    for name in [k for k in provenance.os.environ if k.startswith("JAX_") or k in ("XLA_FLAGS", "PPO_JAX_THREEFRY")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_enable_concurrency_optimized_scheduler=false")
    monkeypatch.setenv("PPO_JAX_THREEFRY", "jax")
    monkeypatch.setenv("JAX_ENABLE_X64", "0")
    monkeypatch.setenv("UNRELATED_SETTING", "1")
    monkeypatch.setenv("MY_JAX_THING", "1")  # JAX_ only as a prefix
    assert provenance.collect_metadata(["bench.py"])["environment"] == {
        "JAX_ENABLE_X64": "0",
        "PPO_JAX_THREEFRY": "jax",
        "XLA_FLAGS": "--xla_cpu_enable_concurrency_optimized_scheduler=false",
    }
    monkeypatch.delenv("XLA_FLAGS")
    monkeypatch.delenv("PPO_JAX_THREEFRY")
    monkeypatch.delenv("JAX_ENABLE_X64")
    assert provenance.collect_metadata(["bench.py"])["environment"] == {}


def test_metadata_records_brax_and_mujoco_versions_only_where_installed(monkeypatch):
    installed = {"jax": "0.10.2", "brax": "0.14.2"}
    monkeypatch.setattr(provenance, "_version", lambda name: installed.get(name))
    versions = provenance.collect_metadata(["bench.py"])["versions"]
    assert versions["brax"] == "0.14.2" and "mujoco" not in versions
    assert versions["gymnax"] is None  # a required one is recorded even when missing
