"""Rotary position embeddings (Su et al. 2021) and their scaled variants, one table entry per ``rope_type``.

``ROPE_TYPES`` holds the variants a config.json may name: ``default`` (frequency
``theta^(-2i/d)``), ``linear`` (positions divided by ``factor``; Chen et al. 2023)
and ``llama3`` (low frequencies divided by ``factor``, a smooth ramp between
``low_freq_factor`` and ``high_freq_factor`` wavelengths; Dubey et al. 2024,
as transformers' ``_compute_llama3_parameters``). Each turns ``RopeParams`` into
the ``[head_dim / 2]`` inverse frequencies; ``rotate`` applies them to queries or
keys in the half-split layout Hugging Face checkpoints use (``rotate_half``: the
pair of dimension ``i`` is ``i + head_dim / 2``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ppo_jax.registry import Registry


@dataclasses.dataclass(frozen=True)
class RopeParams:
    """One rotary embedding: its type, base and (for scaled types) scaling constants."""

    kind: str = "default"
    theta: float = 10000.0
    factor: float = 1.0
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_max_position_embeddings: int = 8192

    def inverse_frequencies(self, head_dim: int) -> np.ndarray:
        """``[head_dim / 2]`` float32 inverse frequencies."""
        base = 1.0 / (np.float32(self.theta) ** (np.arange(0, head_dim, 2).astype(np.float32) / np.float32(head_dim)))
        return ROPE_TYPES[self.kind].scale(self, base.astype(np.float32)).astype(np.float32)

    def to_hf(self) -> dict:
        """config.json keys in the transformers 4.x format."""
        return {"rope_theta": self.theta, "rope_scaling": ROPE_TYPES[self.kind].to_hf(self)}


class RopeType(NamedTuple):
    parse: Callable[[float, dict], RopeParams]
    """``parse(theta, spec)``: ``spec`` is the config's scaling dict without its type; KeyError for a missing key."""
    scale: Callable[[RopeParams, np.ndarray], np.ndarray]
    to_hf: Callable[[RopeParams], dict | None]
    doc: str
    reference: str


def _no_extra(spec: dict, allowed: set[str]) -> None:
    # transformers' own bookkeeping keys, harmless to a forward pass
    extra = set(spec) - allowed - {"attention_factor", "partial_rotary_factor"}
    if extra:
        raise ValueError(f"unsupported keys {sorted(extra)}")
    if spec.get("attention_factor", 1.0) != 1.0 or spec.get("partial_rotary_factor", 1.0) != 1.0:
        raise ValueError("attention_factor and partial_rotary_factor other than 1 are not implemented")


def _parse_default(theta: float, spec: dict) -> RopeParams:
    _no_extra(spec, set())
    return RopeParams("default", theta)


def _parse_linear(theta: float, spec: dict) -> RopeParams:
    _no_extra(spec, {"factor"})
    return RopeParams("linear", theta, factor=float(spec["factor"]))


def _parse_llama3(theta: float, spec: dict) -> RopeParams:
    _no_extra(spec, {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"})
    return RopeParams(
        "llama3",
        theta,
        factor=float(spec["factor"]),
        low_freq_factor=float(spec["low_freq_factor"]),
        high_freq_factor=float(spec["high_freq_factor"]),
        original_max_position_embeddings=int(spec["original_max_position_embeddings"]),
    )


def _scale_llama3(rope: RopeParams, inv_freq: np.ndarray) -> np.ndarray:
    old_context = rope.original_max_position_embeddings
    low_freq_wavelen = old_context / rope.low_freq_factor
    high_freq_wavelen = old_context / rope.high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    scaled = np.where(wavelen > low_freq_wavelen, inv_freq / rope.factor, inv_freq)
    smooth = (old_context / wavelen - rope.low_freq_factor) / (rope.high_freq_factor - rope.low_freq_factor)
    smoothed = (1 - smooth) * scaled / rope.factor + smooth * scaled
    medium = (wavelen >= high_freq_wavelen) & (wavelen <= low_freq_wavelen)
    return np.where(medium, smoothed, scaled)


ROPE_TYPES: Registry[RopeType] = Registry("rope_type", "rotary embedding")
ROPE_TYPES.register(
    "default",
    RopeType(_parse_default, lambda rope, f: f, lambda rope: None, "theta^(-2i/d) frequencies", "Su et al. 2021"),
)
ROPE_TYPES.register(
    "linear",
    RopeType(
        _parse_linear,
        lambda rope, f: f / rope.factor,
        lambda rope: {"rope_type": "linear", "factor": rope.factor},
        "positions divided by factor",
        "Chen et al. 2023",
    ),
)
ROPE_TYPES.register(
    "llama3",
    RopeType(
        _parse_llama3,
        _scale_llama3,
        lambda rope: {
            "rope_type": "llama3",
            "factor": rope.factor,
            "low_freq_factor": rope.low_freq_factor,
            "high_freq_factor": rope.high_freq_factor,
            "original_max_position_embeddings": rope.original_max_position_embeddings,
        },
        "low frequencies divided by factor, smooth ramp between",
        "Dubey et al. 2024",
    ),
)


def rotation(inv_freq: np.ndarray, positions: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``(cos, sin)``, each ``[B, T, head_dim]`` float32, for integer ``positions [B, T]``."""
    angles = positions.astype(jnp.float32)[..., None] * jnp.asarray(inv_freq)  # [B, T, head_dim / 2]
    angles = jnp.concatenate([angles, angles], axis=-1)
    return jnp.cos(angles), jnp.sin(angles)


def rotate(x: jax.Array, cos: jax.Array, sin: jax.Array) -> jax.Array:
    """``x [B, T, H, head_dim]`` rotated by ``cos, sin [B, T, head_dim]`` (cast to x's dtype, as transformers does)."""
    half = x.shape[-1] // 2
    rotated_half = jnp.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    cos, sin = cos[:, :, None].astype(x.dtype), sin[:, :, None].astype(x.dtype)
    return x * cos + rotated_half * sin
