"""Guard against a hang of XLA's CPU runtime, applied before JAX starts its backend.

With jaxlib 0.10.2 on a 2-core CPU, a program holding two independent batched
QR decompositions (orthogonal init under ``vmap`` over seeds: every layer's
init is one) was seen to hang forever under the concurrency-optimized
scheduler. Turning that scheduler off avoids it; it is the only thing this
module changes. XLA reads ``XLA_FLAGS`` once, when the first backend starts,
so importing ppo_jax after JAX has already run something cannot apply it:
then a warning says how to set the flag by hand.
"""

import os
import warnings

FLAG = "--xla_cpu_enable_concurrency_optimized_scheduler=false"


def _apply() -> None:
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_cpu_enable_concurrency_optimized_scheduler" in flags:
        return
    os.environ["XLA_FLAGS"] = f"{flags} {FLAG}".strip()
    try:
        from jax._src import xla_bridge

        started = xla_bridge.backends_are_initialized()
    except (ImportError, AttributeError):
        started = False
    if started:
        warnings.warn(
            "ppo_jax was imported after JAX started its backends, so it could not set "
            f"XLA_FLAGS={FLAG}; vmapped training on a CPU may hang. Import ppo_jax first, "
            f"or export XLA_FLAGS='{FLAG}' before starting Python.",
            RuntimeWarning,
            stacklevel=3,
        )


_apply()
