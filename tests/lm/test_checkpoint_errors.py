"""Every bad checkpoint directory gets one line naming the file and the problem, not a traceback."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file
from tokenizers import Tokenizer

from ppo_jax.lm.checkpoints import CheckpointError, load_checkpoint

FIXTURES = Path(__file__).parent / "fixtures" / "checkpoints"


def copy(name: str, tmp_path: Path) -> Path:
    directory = tmp_path / name
    shutil.copytree(FIXTURES / name, directory)
    return directory


def edit_config(directory: Path, **changes) -> None:
    path = directory / "config.json"
    config = json.loads(path.read_text())
    for key, value in changes.items():
        if value is None:
            config.pop(key, None)
        else:
            config[key] = value
    path.write_text(json.dumps(config))


def refused(directory: Path, *fragments: str) -> str:
    with pytest.raises(CheckpointError) as caught:
        load_checkpoint(directory)
    message = str(caught.value)
    assert "\n" not in message, message
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    return message


def test_a_missing_directory(tmp_path):
    refused(tmp_path / "nowhere", "does not exist")


def test_no_config_json(tmp_path):
    directory = copy("llama", tmp_path)
    (directory / "config.json").unlink()
    refused(directory, "no config.json")


def test_config_json_that_is_not_json(tmp_path):
    directory = copy("llama", tmp_path)
    (directory / "config.json").write_text('{"model_type": "llama",')
    refused(directory, "config.json", "not valid JSON")


def test_an_unsupported_model_type(tmp_path):
    directory = copy("llama", tmp_path)
    edit_config(directory, model_type="gpt_neox")
    refused(directory, "model_type 'gpt_neox' is not supported", "llama, qwen2, qwen3")


@pytest.mark.parametrize(
    "changes, fragment",
    [
        ({"hidden_act": "gelu"}, "hidden_act = 'gelu'"),
        ({"mlp_bias": True}, "mlp_bias"),
        ({"rope_scaling": {"rope_type": "yarn", "factor": 4.0}, "rope_parameters": None}, "rope_type = 'yarn'"),
        ({"num_hidden_layers": None}, "'num_hidden_layers' is missing"),
        ({"num_key_value_heads": 3}, "does not divide"),
    ],
)
def test_an_unsupported_or_missing_config_field_is_named(tmp_path, changes, fragment):
    directory = copy("llama3_scaled", tmp_path)
    edit_config(directory, **changes)
    refused(directory, "config.json", fragment)


def test_sliding_window_attention_is_refused(tmp_path):
    directory = copy("qwen3", tmp_path)
    edit_config(directory, use_sliding_window=True)
    refused(directory, "use_sliding_window")


def test_no_safetensors_and_pickled_weights(tmp_path):
    directory = copy("llama", tmp_path)
    (directory / "model.safetensors").unlink()
    (directory / "pytorch_model.bin").write_bytes(b"not read")
    refused(directory, "neither model.safetensors nor model.safetensors.index.json", "pickles")


def test_a_missing_tensor(tmp_path):
    directory = copy("llama", tmp_path)
    tensors = load_file(str(directory / "model.safetensors"))
    del tensors["model.layers.1.mlp.up_proj.weight"]
    save_file(tensors, str(directory / "model.safetensors"), metadata={"format": "pt"})
    refused(directory, "lacks 1 tensor", "model.layers.1.mlp.up_proj.weight")


def test_a_tensor_of_the_wrong_shape(tmp_path):
    directory = copy("llama", tmp_path)
    tensors = load_file(str(directory / "model.safetensors"))
    tensors["model.layers.0.self_attn.k_proj.weight"] = np.zeros((3, 5), np.float32)
    save_file(tensors, str(directory / "model.safetensors"), metadata={"format": "pt"})
    refused(directory, "model.layers.0.self_attn.k_proj.weight", "[3, 5]", "config.json implies")


def test_a_tensor_of_another_model(tmp_path):
    directory = copy("llama", tmp_path)
    tensors = load_file(str(directory / "model.safetensors"))
    tensors["model.layers.0.self_attn.q_norm.weight"] = np.ones(8, np.float32)
    save_file(tensors, str(directory / "model.safetensors"), metadata={"format": "pt"})
    refused(directory, "does not have", "q_norm")


def test_a_truncated_safetensors_file(tmp_path):
    directory = copy("llama", tmp_path)
    path = directory / "model.safetensors"
    path.write_bytes(path.read_bytes()[:200])
    refused(directory, "model.safetensors", "not a readable safetensors file")


def test_an_index_naming_a_missing_shard(tmp_path):
    directory = copy("qwen2", tmp_path)
    index = json.loads((directory / "model.safetensors.index.json").read_text())
    (directory / sorted(set(index["weight_map"].values()))[-1]).unlink()
    refused(directory, "lists the shard", "missing")


def test_a_tokenizer_larger_than_the_embedding(tmp_path):
    directory = copy("llama", tmp_path)
    tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
    rows = json.loads((directory / "config.json").read_text())["vocab_size"]
    tokenizer.add_tokens([f"<extra_{i}>" for i in range(rows)])
    tokenizer.save(str(directory / "tokenizer.json"))
    refused(directory, "tokenizer.json", "embedding has", "different models")


def test_a_corrupt_tokenizer(tmp_path):
    directory = copy("llama", tmp_path)
    (directory / "tokenizer.json").write_text("{")
    refused(directory, "tokenizer.json", "not a readable tokenizer.json")


def test_no_tokenizer_files_is_fine(tmp_path):
    directory = copy("qwen3", tmp_path)
    for path in directory.glob("tokenizer*"):
        path.unlink()
    assert load_checkpoint(directory).tokenizer is None
