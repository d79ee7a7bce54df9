"""LoRA (Hu et al. 2022) for the decoder family: low-rank adapters on its projections, the base frozen.

A targeted kernel ``W [L, in, out]`` (stacked over the layers, as ``decoder.py``
stores them) gets ``A [L, in, r]`` and ``B [L, r, out]``; the projection becomes

    x W + (alpha / r) x A B                  Hu et al. (2022), eq. 3

with ``A`` Gaussian and ``B`` zero, so a fresh adapter leaves the model exactly the
base. The adapters of a model are ``{name: {"a": A, "b": B}}`` over the targets
(``lora_targets``); with ``lora_rank > 0`` they are the whole of a run's trainable
actor (``params["actor"]`` of its TrainState, so Adam's moments are theirs only).

The base is never copied nor differentiated: ``with_base`` builds, inside the
program, the parameters the decoder runs on, the base's dict with the adapters
beside its kernels (``layers["<name>_lora_a"]``, ``layers["<name>_lora_b"]``, B
already scaled by alpha / r; ``decoder._linear`` adds their term). The reference
is the base itself (the SFT model), so the policy and its reference share one copy.
``merge`` folds the adapters into the kernels, ``W + (alpha / r) A B``, for export.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ppo_jax.config_fields import check_range
from ppo_jax.errors import ConfigError
from ppo_jax.lm import decoder
from ppo_jax.lm.models import is_decoder_family, make_models

TARGETS = ("q", "k", "v", "o", "gate", "up", "down")
"""The projections an adapter may target (``decoder.param_shapes``' layer kernels)."""


def targets(cfg) -> tuple[str, ...]:
    """``cfg.lora_targets`` as names, in the order written."""
    return tuple(name.strip() for name in cfg.lora_targets.split(",") if name.strip())


def scale(cfg) -> jax.Array:
    """``lora_alpha / lora_rank`` (Hu et al. 2022, sec. 4.1), float32 (the alpha may be traced)."""
    return jnp.asarray(cfg.lora_alpha, jnp.float32) / cfg.lora_rank


def check(cfg) -> None:
    """ConfigError for a negative rank; with a rank, for a model outside the decoder family, unknown or repeated
    targets, a rank above a targeted kernel's smaller side, or ``lora_alpha <= 0``."""
    if cfg.lora_rank < 0:
        raise ConfigError(f"lora_rank must be >= 0 (0: full fine-tuning), got {cfg.lora_rank}.")
    if cfg.lora_rank == 0:
        return
    if not is_decoder_family(cfg):
        raise ConfigError(
            f"lora_rank={cfg.lora_rank}: LoRA adapts the decoder family's projections, and model={cfg.model!r} is not "
            "one; use --model decoder (or a checkpoint directory), or lora_rank 0 (full fine-tuning)."
        )
    names = targets(cfg)
    unknown = [name for name in names if name not in TARGETS]
    if unknown or not names or len(set(names)) != len(names):
        raise ConfigError(
            f"lora_targets={cfg.lora_targets!r}: give distinct names, comma-separated, among {', '.join(TARGETS)}"
            + (f" ({', '.join(unknown)} is not one)." if unknown else ".")
        )
    shapes = decoder.param_shapes(make_models(cfg).policy)["layers"]
    smallest = min(min(shapes[name][1:]) for name in names)
    if cfg.lora_rank > smallest:
        raise ConfigError(
            f"lora_rank={cfg.lora_rank} is above the smallest side of the targeted kernels ({smallest}), where a "
            f"low-rank update is no longer low-rank; use at most {smallest} (Hu et al. use 1 to 64)."
        )
    check_range("lora_alpha", cfg.lora_alpha, low=0, low_open=True, hint=" Hu et al. (2022) set it to the rank.")


def init_adapters(model: decoder.Decoder, names: tuple[str, ...], rank: int, key: jax.Array) -> dict:
    """``{name: {"a": [L, in, rank], "b": [L, rank, out]}}``: A normal with std 1/rank (PEFT's Gaussian init), B 0."""
    shapes = decoder.param_shapes(model)["layers"]
    dtype = jnp.dtype(model.config.param_dtype)
    adapters = {}
    for name, name_key in zip(names, jax.random.split(key, len(names)), strict=True):
        L, d_in, d_out = shapes[name]
        a = jax.random.normal(name_key, (L, d_in, rank), jnp.float32) / rank
        adapters[name] = {"a": a.astype(dtype), "b": jnp.zeros((L, rank, d_out), dtype)}
    return adapters


def init_actor(cfg, model, sft: dict, key: jax.Array) -> dict:
    """A run's trainable actor: the SFT model's parameters (full fine-tuning) or fresh adapters (``lora_rank > 0``)."""
    if not cfg.lora_rank:
        return sft
    return init_adapters(model, targets(cfg), cfg.lora_rank, key)


def attach(base: dict, adapters: dict, lora_scale) -> dict:
    """The base's parameters with the adapters beside their kernels (``<name>_lora_a``, ``<name>_lora_b`` scaled by
    ``lora_scale``), which ``decoder.run`` and ``decoder.generate`` read; the base's arrays are shared, not copied."""
    extra = {}
    for name, adapter in adapters.items():
        b = adapter["b"]
        extra[f"{name}_lora_a"] = adapter["a"]
        extra[f"{name}_lora_b"] = (jnp.asarray(lora_scale, jnp.float32) * b).astype(b.dtype)
    return {**base, "layers": {**base["layers"], **extra}}


def with_base(cfg, params: dict, base: dict) -> dict:
    """The parameters the models run on from a TrainState's ``params``: ``"actor"`` is base + adapters with
    ``lora_rank > 0`` (``attach``), else unchanged (the full actor); the critic is always a full model."""
    if not cfg.lora_rank:
        return params
    return {**params, "actor": attach(base, params["actor"], scale(cfg))}


def merge(base: dict, adapters: dict, lora_scale: float) -> dict:
    """The base's parameters with each targeted kernel replaced by ``W + lora_scale * A B`` (float32 sums, cast back
    to W's dtype), NumPy arrays: one model that any Llama loader reads."""
    layers = dict(base["layers"])
    for name, adapter in adapters.items():
        kernel = np.asarray(layers[name])
        delta = np.einsum("lir,lro->lio", np.asarray(adapter["a"], np.float32), np.asarray(adapter["b"], np.float32))
        layers[name] = (kernel.astype(np.float32) + np.float32(lora_scale) * delta).astype(kernel.dtype)
    return {**base, "layers": layers}
