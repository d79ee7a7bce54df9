"""One LM run over a device mesh (``LmConfig.mesh``, ``--mesh data=D,fsdp=F[,tensor=T]``), by logical-axis rules.

As MaxText and tunix do it: every parameter dimension has a logical name
(``PARAM_AXES``: ``q`` is ``("layers", "embed", "heads")``), ``RULES`` maps each
logical name to a mesh axis, and XLA's SPMD partitioner does the rest from the
``NamedSharding``s and ``with_sharding_constraint``s this module places — no
collectives of our own. A mesh axis of size 1 changes nothing, so ``tensor``
defaults to 1.

    logical axis                      mesh axis
    batch (sequences)                 (data, fsdp)
    embed (model width D)             fsdp          parameters and Adam moments: ZeRO-3 / FSDP
    vocab, heads, kv_heads, mlp       tensor        Megatron-style tensor parallelism
    layers, norm, head_dim, length    (none)

A dimension of size 1 (a value head's output) is never split. A parameter the
table does not name (the ``transformer`` and ``gru`` models' flax trees, LoRA
adapters) falls back to FSDP on its largest dimension that ``fsdp`` divides
(replicated if none does). Optimizer states mirror the parameter tree (optax:
``mu``, ``nu`` hold one leaf per parameter under the same names), so a leaf is
matched by its last name and rank wherever it sits; scalars are replicated.

Inside the engine (``init``, ``step`` under ``on_mesh``) the constraints read
the mesh from ``jax.sharding.use_abstract_mesh``; the arrays that enter the
program (``place``: the SFT / reference and reward models) carry the concrete
mesh of ``jax.devices()``, every device of every process (``jax.distributed``).
Under ``vmap`` over seeds a constraint leaves the seed axis unconstrained.
Without a mesh every function here is the identity and the program is unchanged.

References: GSPMD (Xu et al. 2021) partitions the program; ZeRO-3 / FSDP (Rajbhandari et al. 2020) and Megatron-LM's
tensor parallelism (Shoeybi et al. 2019) are what the fsdp and tensor rules amount to.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import jax
import numpy as np
from jax.sharding import AxisType, NamedSharding, PartitionSpec

from ppo_jax.errors import ConfigError

MESH_AXES = ("data", "fsdp", "tensor")
"""The mesh's axes, in this order; ``--mesh`` may leave any out (size 1)."""

RULES: dict[str, tuple[str, ...] | str | None] = {
    "batch": ("data", "fsdp"),
    "embed": "fsdp",
    "vocab": "tensor",
    "heads": "tensor",
    "kv_heads": "tensor",
    "mlp": "tensor",
    "layers": None,
    "norm": None,
    "head_dim": None,
    "length": None,
}
"""Logical axis -> mesh axis (or axes); None: not split."""

_LAYER = "layers"
PARAM_AXES: dict[str, tuple[str, ...]] = {
    "embed": ("vocab", "embed"),
    "norm": ("norm",),
    "head": ("embed", "vocab"),
    "attention_norm": (_LAYER, "norm"),
    "mlp_norm": (_LAYER, "norm"),
    "q": (_LAYER, "embed", "heads"),
    "k": (_LAYER, "embed", "kv_heads"),
    "v": (_LAYER, "embed", "kv_heads"),
    "o": (_LAYER, "heads", "embed"),
    "q_bias": (_LAYER, "heads"),
    "k_bias": (_LAYER, "kv_heads"),
    "v_bias": (_LAYER, "kv_heads"),
    "o_bias": (_LAYER, "norm"),
    "q_norm": (_LAYER, "head_dim"),
    "k_norm": (_LAYER, "head_dim"),
    "gate": (_LAYER, "embed", "mlp"),
    "up": (_LAYER, "embed", "mlp"),
    "down": (_LAYER, "mlp", "embed"),
}
"""Logical axes of the decoder family's parameters (``ppo_jax.lm.decoder``), by name (kernels ``[in, out]``)."""

KV_CACHE_AXES = (_LAYER, "batch", "length", "kv_heads", "head_dim")
"""The decoder's key-value cache ``[L, B, S, K, Dh]``."""


class MeshShape(NamedTuple):
    data: int = 1
    fsdp: int = 1
    tensor: int = 1

    @property
    def size(self) -> int:
        return self.data * self.fsdp * self.tensor

    @property
    def batch_ways(self) -> int:
        """How many shards the batch is split into: data x fsdp."""
        return self.data * self.fsdp


def parse_mesh(text: str) -> MeshShape:
    """``"data=2,fsdp=2"`` -> ``MeshShape(2, 2, 1)``; ConfigError for unknown or repeated axes and non-positive sizes."""
    sizes = {}
    for part in (p.strip() for p in text.split(",")):
        name, eq, value = part.partition("=")
        name = name.strip()
        if not eq or name not in MESH_AXES:
            raise ConfigError(
                f"mesh {text!r}: {part!r} is not AXIS=SIZE with AXIS among {', '.join(MESH_AXES)} "
                "(e.g. --mesh data=2,fsdp=4)."
            )
        if name in sizes:
            raise ConfigError(f"mesh {text!r}: axis {name} is given twice.")
        if not value.strip().isdecimal() or int(value) < 1:
            raise ConfigError(f"mesh {text!r}: the size of {name} must be a positive integer, got {value.strip()!r}.")
        sizes[name] = int(value)
    return MeshShape(**sizes)


@functools.cache
def make_mesh(text: str) -> jax.sharding.Mesh:
    """The ``Mesh`` of ``text`` over ``jax.devices()`` (all processes'), axes ``data, fsdp, tensor``, all Auto."""
    shape = parse_mesh(text)
    return jax.make_mesh(tuple(shape), MESH_AXES, axis_types=(AxisType.Auto,) * len(MESH_AXES))


def mesh_axes(logical: str | None, size: int, shape: MeshShape) -> tuple[str, ...]:
    """The mesh axes (of size > 1) that split a dimension of ``size`` named ``logical``; none for a size-1 dimension."""
    rule = RULES.get(logical) if logical else None
    names = (rule,) if isinstance(rule, str) else tuple(rule or ())
    return () if size == 1 else tuple(n for n in names if getattr(shape, n) > 1)


def _entry(axes: tuple[str, ...]):
    return None if not axes else axes[0] if len(axes) == 1 else axes


def _name(path) -> str | None:
    """The last dictionary key on ``path``: a parameter's name in its tree (None if there is none)."""
    for entry in reversed(path):
        if isinstance(entry, jax.tree_util.DictKey):
            return str(entry.key)
    return None


def logical_axes(path, shape: tuple[int, ...]) -> tuple[str, ...] | None:
    """The leaf's logical axes from ``PARAM_AXES`` (by its name, if the rank agrees), else None (the fallback)."""
    axes = PARAM_AXES.get(_name(path))
    return axes if axes is not None and len(axes) == len(shape) else None


def param_spec(path, shape: tuple[int, ...], mesh: MeshShape) -> PartitionSpec:
    """A parameter's (or an optimizer moment's) ``PartitionSpec``: the rules, or FSDP on its largest divisible dim."""
    if not shape:
        return PartitionSpec()
    axes = logical_axes(path, shape)
    if axes is not None:
        return PartitionSpec(*(_entry(mesh_axes(name, n, mesh)) for name, n in zip(axes, shape, strict=True)))
    spec = [None] * len(shape)
    divisible = [i for i, n in enumerate(shape) if mesh.fsdp > 1 and n > 1 and n % mesh.fsdp == 0]
    if divisible:
        spec[max(divisible, key=lambda i: (shape[i], -i))] = "fsdp"
    return PartitionSpec(*spec)


def _replicated(x) -> bool:
    """Scalars (a Python int step count among them) and PRNG keys: left whole on every device."""
    return not np.shape(x) or jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)


def param_specs(tree, mesh: MeshShape):
    """``PartitionSpec`` per leaf of a parameter tree, a train state or optimizer state (scalars and keys: replicated)."""
    return jax.tree_util.tree_map_with_path(
        lambda path, x: PartitionSpec() if _replicated(x) else param_spec(path, tuple(x.shape), mesh), tree
    )


def batch_spec(x) -> PartitionSpec:
    """A batch leaf ``[B, ...]``: its rows over (data, fsdp)."""
    return PartitionSpec(RULES["batch"], *([None] * (len(x.shape) - 1))) if x.shape else PartitionSpec()


# ----------------------------------------------------------------------------- inside the program


def on_mesh(fn: Callable) -> Callable:
    """``fn(cfg, ...)`` traced with ``cfg.mesh``'s abstract mesh in context, so the constraints below act; no mesh:
    ``fn`` as it is."""

    @functools.wraps(fn)
    def wrapped(cfg, *args, **kwargs):
        if not cfg.mesh:
            return fn(cfg, *args, **kwargs)
        with jax.sharding.use_abstract_mesh(make_mesh(cfg.mesh).abstract_mesh):
            return fn(cfg, *args, **kwargs)

    return wrapped


def _current() -> MeshShape | None:
    mesh = jax.sharding.get_abstract_mesh()
    if mesh.empty or set(mesh.axis_names) != set(MESH_AXES):
        return None
    return MeshShape(**dict(zip(mesh.axis_names, mesh.axis_sizes, strict=True)))


def _constrain(tree, specs_of: Callable):
    mesh = _current()
    if mesh is None:
        return tree
    specs = specs_of(tree, mesh)
    return jax.tree.map(
        lambda x, spec: x if _replicated(x) else jax.lax.with_sharding_constraint(x, spec),
        tree,
        specs,
    )


def constrain_params(tree):
    """``tree`` (parameters, a TrainState) constrained to ``param_specs`` on the mesh in context (none: unchanged)."""
    return _constrain(tree, param_specs)


def constrain_batch(tree):
    """Every leaf ``[B, ...]`` of ``tree`` constrained to rows over (data, fsdp) (no mesh in context: unchanged)."""
    return _constrain(tree, lambda t, mesh: jax.tree.map(batch_spec, t))


def constrain_cache(cache):
    """A key-value cache (leaves ``[L, B, S, K, Dh]``) constrained by ``KV_CACHE_AXES`` (no mesh: unchanged)."""

    def specs(tree, mesh):
        return jax.tree.map(
            lambda x: PartitionSpec(
                *(_entry(mesh_axes(n, d, mesh)) for n, d in zip(KV_CACHE_AXES, x.shape, strict=True))
            ),
            tree,
        )

    return _constrain(cache, specs)


# ----------------------------------------------------------------------------- outside the program


def place(text: str, tree, specs):
    """``tree``'s host arrays as global arrays on mesh ``text`` with ``specs`` (each process gives its shards);
    ``ShapeDtypeStruct`` leaves get the sharding (a program compiled on abstract shapes takes what runs get)."""
    mesh = make_mesh(text)

    def put(x, spec):
        where = NamedSharding(mesh, spec)
        if isinstance(x, jax.ShapeDtypeStruct):
            return jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=where)
        x = np.asarray(x)
        return jax.make_array_from_callback(x.shape, where, lambda index: x[index])

    return jax.tree.map(put, tree, specs)


def check(cfg, param_shapes: dict | None = None) -> None:
    """ConfigError (before anything compiles) if ``cfg.mesh`` cannot hold this run: its axes and sizes, the devices
    there are, the batch sizes, and the decoder's dimensions (``param_shapes``: ``decoder.param_shapes`` of the
    policy; None for the transformer and gru, whose fallback splits only what fsdp divides). No mesh: nothing to
    check (and no backend started)."""
    if not cfg.mesh:
        return
    shape = parse_mesh(cfg.mesh)
    devices = jax.device_count()
    if shape.size != devices:
        raise ConfigError(
            f"mesh {cfg.mesh!r} needs {shape.size} devices (data x fsdp x tensor), but {devices} "
            f"{'is' if devices == 1 else 'are'} available ({jax.process_count()} process(es), {jax.default_backend()}). "
            f"Choose sizes whose product is {devices}; for more devices: on a CPU set "
            "XLA_FLAGS=--xla_force_host_platform_device_count=N before starting, across hosts add --distributed "
            "(jax.distributed)."
        )
    ways, mb = shape.batch_ways, cfg.num_sequences // cfg.num_minibatches
    for what, rows in (
        ("num_prompts x group_size", cfg.num_sequences),
        ("a minibatch (num_prompts x group_size / num_minibatches)", mb),
        ("a micro-batch (minibatch / micro_batches)", mb // cfg.micro_batches),
    ):
        if rows % ways:
            raise ConfigError(
                f"mesh {cfg.mesh!r} splits the batch into data x fsdp = {ways} shards, but {what} is {rows} "
                f"sequences: make it a multiple of {ways}."
            )
    if param_shapes is None:
        return
    flat = jax.tree_util.tree_flatten_with_path(param_shapes, is_leaf=lambda x: isinstance(x, tuple))
    for path, dims in flat[0]:
        for name, n in zip(logical_axes(path, dims) or [None] * len(dims), dims, strict=True):
            for axis in mesh_axes(name, n, shape):
                if n % getattr(shape, axis):
                    raise ConfigError(
                        f"mesh {cfg.mesh!r}: parameter {_name(path)} {dims} splits its {name} dimension ({n}) "
                        f"over {axis}={getattr(shape, axis)}, which does not divide it: choose {axis} among "
                        f"{[d for d in range(1, n + 1) if n % d == 0]}, or change the model's sizes."
                    )
