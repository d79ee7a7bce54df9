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
