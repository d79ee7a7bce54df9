"""Hugging Face tensor names <-> the decoder's parameter pytree (``decoder.py``), and safetensors files.

``TENSOR_NAMES`` maps each layer parameter to its name in a Llama / Qwen
checkpoint (``model.layers.{i}.<name>``); Linear weights are stored ``[out, in]``
there and ``[in, out]`` here, so kernels are transposed both ways. Tensors are read
through the ``safetensors`` library (``framework="flax"``: bfloat16 included)
from model.safetensors or the shards a model.safetensors.index.json lists.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import jax.numpy as jnp
import numpy as np
from safetensors import safe_open
from safetensors.flax import save_file

from ppo_jax.lm.decoder import Decoder, param_shapes
from ppo_jax.lm.decoder_config import CheckpointError

TENSOR_NAMES = {
    "attention_norm": "input_layernorm.weight",
    "q": "self_attn.q_proj.weight",
    "k": "self_attn.k_proj.weight",
    "v": "self_attn.v_proj.weight",
    "o": "self_attn.o_proj.weight",
    "q_bias": "self_attn.q_proj.bias",
    "k_bias": "self_attn.k_proj.bias",
    "v_bias": "self_attn.v_proj.bias",
    "o_bias": "self_attn.o_proj.bias",
    "q_norm": "self_attn.q_norm.weight",
    "k_norm": "self_attn.k_norm.weight",
    "mlp_norm": "post_attention_layernorm.weight",
    "gate": "mlp.gate_proj.weight",
    "up": "mlp.up_proj.weight",
    "down": "mlp.down_proj.weight",
}
TOP_NAMES = {"embed": "model.embed_tokens.weight", "norm": "model.norm.weight", "head": "lm_head.weight"}
IGNORED = ("rotary_emb.inv_freq",)  # buffers some older checkpoints saved; recomputed from config.json
TRANSPOSED = {"q", "k", "v", "o", "gate", "up", "down", "head"}

SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"


def _hf_shape(name: str, shape: tuple[int, ...]) -> tuple[int, ...]:
    return shape[::-1] if name in TRANSPOSED else shape


def expected_tensors(model: Decoder) -> dict[str, tuple[str, int | None, tuple[int, ...]]]:
    """``{hf_name: (param_name, layer or None, hf_shape)}`` for every tensor the checkpoint must hold."""
    shapes = param_shapes(model)
    expected = {}
    for name, shape in shapes.items():
        if name != "layers":
            expected[TOP_NAMES[name]] = (name, None, _hf_shape(name, shape))
    for name, shape in shapes["layers"].items():
        for layer in range(shape[0]):
            expected[f"model.layers.{layer}.{TENSOR_NAMES[name]}"] = (name, layer, _hf_shape(name, shape[1:]))
    return expected


def tensor_files(directory: Path) -> dict[str, Path]:
    """``{tensor name: file}`` from model.safetensors or the sharded index; CheckpointError naming what is missing."""
    single, index = directory / SINGLE_FILE, directory / INDEX_FILE
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text())["weight_map"]
        except (json.JSONDecodeError, KeyError, TypeError, UnicodeDecodeError) as error:
            raise CheckpointError(f"{index}: not a safetensors index with a weight_map ({error}).") from None
        for file in sorted(set(weight_map.values())):
            if not (directory / file).is_file():
                raise CheckpointError(f"{index} lists the shard {file}, which is missing from {directory}.")
        return {name: directory / file for name, file in weight_map.items()}
    if single.is_file():
        return {name: single for name in _names_in(single)}
    hint = ""
    if list(directory.glob("*.bin")) or list(directory.glob("*.pt")):
        hint = " PyTorch .bin weights are not read (they are pickles); save them with save_pretrained(safe_serialization=True)."
    raise CheckpointError(f"{directory} has neither {SINGLE_FILE} nor {INDEX_FILE}.{hint}")


def _names_in(path: Path) -> list[str]:
    try:
        with safe_open(str(path), framework="flax") as handle:
            return list(handle.keys())
    except Exception as error:  # the Rust reader raises its own SafetensorError
        raise CheckpointError(f"{path}: not a readable safetensors file ({error}).") from None


@contextlib.contextmanager
def _reading(file: Path):
    """``safe_open(file)``; any error of the reader (its own SafetensorError, OSError) as a CheckpointError naming it."""
    try:
        with safe_open(str(file), framework="flax") as handle:
            yield handle
    except CheckpointError:
        raise
    except Exception as error:
        raise CheckpointError(f"{file}: not a readable safetensors file ({error}).") from None


def check_tensors(model: Decoder, directory: Path) -> dict[str, Path]:
    """``{tensor name: file}`` once every tensor config.json implies is there with its shape and no other is.

    Reads the safetensors headers only (no tensor data), so a large checkpoint is checked before anything compiles.
    """
    files = tensor_files(directory)
    expected = expected_tensors(model)
    tied_head = "lm_head.weight" not in expected  # a tied checkpoint may still carry the (equal) lm_head
    unexpected = [
        n for n in files if n not in expected and not n.endswith(IGNORED) and not (tied_head and n == "lm_head.weight")
    ]
    if unexpected:
        raise CheckpointError(
            f"{directory}: tensors a {model.config.model_type} model with this config.json does not have: "
            f"{', '.join(sorted(unexpected)[:5])}{' ...' if len(unexpected) > 5 else ''}."
        )
    missing = [n for n in expected if n not in files]
    if missing:
        raise CheckpointError(
            f"{directory}: the checkpoint lacks {len(missing)} tensor(s) config.json implies, e.g. {missing[0]} "
            f"(shape {list(expected[missing[0]][2])})."
        )
    for file in sorted(set(files[n] for n in expected)):
        with _reading(file) as handle:
            present = set(handle.keys())
            for hf_name in (n for n in expected if files[n] == file):
                if hf_name not in present:
                    raise CheckpointError(f"{file}: the index places tensor {hf_name} here, but the file lacks it.")
                shape = tuple(handle.get_slice(hf_name).get_shape())
                if shape != expected[hf_name][2]:
                    raise CheckpointError(
                        f"{file}: tensor {hf_name} has shape {list(shape)}; config.json implies {list(expected[hf_name][2])}."
                    )
    return files


def read_params(model: Decoder, directory: Path) -> dict:
    """The parameter pytree of ``model`` from ``directory``'s safetensors (``check_tensors`` first), in the config's
    param dtype."""
    files = check_tensors(model, directory)
    expected = expected_tensors(model)
    dtype = jnp.dtype(model.config.param_dtype)
    layers = {name: [None] * shape[0] for name, shape in param_shapes(model)["layers"].items()}
    top = {}
    for file in sorted(set(files[n] for n in expected)):
        with _reading(file) as handle:
            for hf_name in (n for n in expected if files[n] == file):
                name, layer, _ = expected[hf_name]
                tensor = jnp.asarray(handle.get_tensor(hf_name), dtype)
                tensor = tensor.T if name in TRANSPOSED else tensor
                if layer is None:
                    top[name] = tensor
                else:
                    layers[name][layer] = tensor
    return {**top, "layers": {name: jnp.stack(tensors) for name, tensors in layers.items()}}


def hf_tensors(model: Decoder, params: dict) -> dict[str, np.ndarray]:
    """``{hf_name: array}`` of ``params`` in Hugging Face's layout (kernels ``[out, in]``)."""
    out = {}
    for hf_name, (name, layer, _) in expected_tensors(model).items():
        tensor = params[name] if layer is None else params["layers"][name][layer]
        out[hf_name] = jnp.asarray(tensor.T if name in TRANSPOSED else tensor)
    return out


def write_tensors(directory: Path, tensors: dict, *, max_shard_bytes: int) -> None:
    """``tensors`` into model.safetensors, or shards of at most ``max_shard_bytes`` and their index."""
    sizes = {name: t.size * t.dtype.itemsize for name, t in tensors.items()}
    shards, current, current_bytes = [], {}, 0
    for name, tensor in tensors.items():
        if current and current_bytes + sizes[name] > max_shard_bytes:
            shards.append(current)
            current, current_bytes = {}, 0
        current[name] = tensor
        current_bytes += sizes[name]
    shards.append(current)
    metadata = {"format": "pt"}  # transformers' loader asks for it
    if len(shards) == 1:
        save_file(shards[0], str(directory / SINGLE_FILE), metadata=metadata)
        return
    weight_map = {}
    for number, shard in enumerate(shards, start=1):
        file = f"model-{number:05d}-of-{len(shards):05d}.safetensors"
        save_file(shard, str(directory / file), metadata=metadata)
        weight_map |= dict.fromkeys(shard, file)
    index = {"metadata": {"total_size": sum(sizes.values())}, "weight_map": weight_map}
    (directory / INDEX_FILE).write_text(json.dumps(index, indent=2) + "\n")
