"""Weight initializers shared by every task's networks: the QR-free orthogonal init.

The orthogonal matrices come from Gram-Schmidt on a Gaussian matrix, written in
plain jnp ops, rather than from LAPACK's QR: it draws from the same (Haar)
distribution as ``flax.linen.initializers.orthogonal`` but puts no QR custom
call in the program. Under ``vmap`` over seeds a QR becomes a batched LAPACK
call, and XLA's CPU runtime can hang on programs holding two such calls; the usual
cure, ``--xla_cpu_enable_concurrency_optimized_scheduler=false``, slows training
(docs/benchmarks/), so we avoid the call instead.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax


def gram_schmidt(a: jax.Array) -> jax.Array:
    """Orthonormalize the columns of ``a [n, m]`` (n >= m) in order.

    Classical Gram-Schmidt with one re-orthogonalization pass (CGS2), which is
    as accurate as Householder QR in float32 for full-rank matrices. The result
    equals Q of ``a = QR`` with R's diagonal made positive.
    """
    m = a.shape[1]

    def column(j, q):
        earlier = (jnp.arange(m) < j).astype(a.dtype)  # columns < j are done
        v = q[:, j]
        for _ in range(2):
            v = v - q @ ((q.T @ v) * earlier)
        return q.at[:, j].set(v / jnp.linalg.norm(v))

    return lax.fori_loop(0, m, column, a)


def orthogonal(scale: float = 1.0):
    """Orthogonal initializer for a 2-D kernel ``[in, out]`` (Saxe et al. 2014), QR-free."""

    def init(key, shape, dtype=jnp.float32):
        rows, cols = shape
        tall = jax.random.normal(key, (max(rows, cols), min(rows, cols)), dtype)
        q = gram_schmidt(tall)
        return scale * (q if rows >= cols else q.T)

    return init
