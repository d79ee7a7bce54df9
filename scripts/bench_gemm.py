"""fp32 matrix products on this machine: NumPy's BLAS beside XLA, against the CPU's peak. Prints a table, writes JSON.

    python scripts/bench_gemm.py                         # square GEMMs and the PPO networks' shapes
    python scripts/bench_gemm.py --repeats 20 --out bench_results/gemm.json

For each shape ``[batch,] m x k @ k x n``: the minimum time over ``--repeats`` timings of NumPy's ``matmul``
(its BLAS) and of ``jax.jit(jnp.matmul)`` (XLA's CPU kernels), each timing long enough (at least
``--min-seconds``, by repeating the product) that the clock's resolution does not matter; GFLOP/s =
2 batch m k n / time. The peak is cores x FLOP per cycle per core x clock: cores are the CPUs this
process may use, the clock is lscpu's "CPU max MHz" where the VM reports it (else /proc/cpuinfo's
"cpu MHz", often the TSC's rate), and FLOP per cycle is ``--flops-per-cycle`` (default 32: two 256-bit FMA
pipes x 8 fp32 lanes x 2, which is AMD Zen 2-4 and Intel's AVX2 cores; 64 for two 512-bit FMA pipes). A
rate above that peak means the measurement (or the peak's assumptions) is wrong.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from ppo_jax.storage.provenance import collect_metadata

SHAPES = (  # (batch, m, k, n): square GEMMs, then the networks' minibatch products
    (1, 256, 256, 256),
    (1, 512, 512, 512),
    (1, 1024, 1024, 1024),
    (1, 2048, 2048, 2048),
    (1, 128, 64, 64),  # CartPole: a 128-sample minibatch through a 64-wide layer
    (1, 64, 256, 256),  # Pendulum: a 64-sample minibatch through a 256-wide layer
    (16, 64, 256, 256),  # the same at 16 seeds (vmap: a batched product)
    (64, 128, 64, 64),  # CartPole at 64 seeds
)


def clock_ghz() -> tuple[float, str]:
    """(GHz, where it came from): lscpu's max MHz if the VM reports one, else /proc/cpuinfo's cpu MHz."""
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        found = re.search(r"CPU max MHz:\s*([\d.]+)", text)
        if found:
            return float(found.group(1)) / 1000, "lscpu CPU max MHz"
    except (OSError, subprocess.CalledProcessError):
        pass
    found = re.search(r"cpu MHz\s*:\s*([\d.]+)", Path("/proc/cpuinfo").read_text())
    return (float(found.group(1)) / 1000, "/proc/cpuinfo cpu MHz") if found else (float("nan"), "unknown")


def best_time(run, min_seconds: float, repeats: int) -> float:
    """Seconds per call: the minimum over ``repeats`` timings of enough calls to last ``min_seconds``."""
    run()  # warm-up (and XLA's compile)
    start, calls = time.perf_counter(), 0
    while time.perf_counter() - start < min_seconds:
        run()
        calls += 1
    calls = max(calls, 1)
    timings = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            run()
        timings.append((time.perf_counter() - start) / calls)
    return min(timings)


def measure(batch: int, m: int, k: int, n: int, min_seconds: float, repeats: int) -> dict:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((batch, m, k), dtype=np.float32)
    b = rng.standard_normal((batch, k, n), dtype=np.float32)
    if batch == 1:
        a, b = a[0], b[0]
    product = jax.jit(jnp.matmul)
    a_dev, b_dev = jnp.asarray(a), jnp.asarray(b)
    np.testing.assert_allclose(np.asarray(product(a_dev, b_dev)), a @ b, rtol=2e-3, atol=2e-3 * k)
    flop = 2.0 * batch * m * k * n
    numpy_s = best_time(lambda: np.matmul(a, b), min_seconds, repeats)
    xla_s = best_time(lambda: product(a_dev, b_dev).block_until_ready(), min_seconds, repeats)
    return {
        "shape": f"{batch} x {m}x{k} @ {k}x{n}" if batch > 1 else f"{m}x{k} @ {k}x{n}",
        "flop": flop,
        "numpy_s": numpy_s,
        "xla_s": xla_s,
        "numpy_gflops": flop / numpy_s / 1e9,
        "xla_gflops": flop / xla_s / 1e9,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--flops-per-cycle", type=float, default=32.0, help="fp32 FLOP per cycle per core")
    parser.add_argument("--repeats", type=int, default=10, help="timings per shape and side; the minimum is kept")
    parser.add_argument("--min-seconds", type=float, default=0.05, help="least duration of one timing")
    parser.add_argument("--out", type=Path, default=Path("bench_results/gemm.json"))
    args = parser.parse_args()
    cores = len(os.sched_getaffinity(0))
    ghz, clock_source = clock_ghz()
    peak = cores * args.flops_per_cycle * ghz
    print(
        f"peak: {cores} cores x {args.flops_per_cycle:g} FLOP/cycle x {ghz:.2f} GHz ({clock_source}) = {peak:.0f} GFLOP/s"
    )
    header = f"{'shape':<26} {'numpy GFLOP/s':>13} {'XLA GFLOP/s':>11} {'numpy % peak':>12} {'XLA % peak':>10}"
    print(header)
    print("-" * len(header))
    rows = []
    for shape in SHAPES:
        row = measure(*shape, args.min_seconds, args.repeats)
        rows.append(row)
        print(
            f"{row['shape']:<26} {row['numpy_gflops']:>13.1f} {row['xla_gflops']:>11.1f} "
            f"{100 * row['numpy_gflops'] / peak:>11.0f}% {100 * row['xla_gflops'] / peak:>9.0f}%",
            flush=True,
        )
    result = {
        "peak_gflops": peak,
        "peak": {"cores": cores, "flops_per_cycle": args.flops_per_cycle, "ghz": ghz, "clock_source": clock_source},
        "results": rows,
        "metadata": collect_metadata(["python", "scripts/bench_gemm.py", *sys.argv[1:]]),
        "numpy_blas": np.show_config(mode="dicts").get("Build Dependencies", {}).get("blas", {}),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, default=str))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
