"""Estimated memory of one GRPO update for SmolLM2-135M, Qwen2.5-0.5B and Qwen2.5-1.5B shapes: no weights needed.

Each model is built from its published config.json values (written below; abstract shapes only, nothing is
downloaded or allocated) and the run's update program is compiled on ``jax.ShapeDtypeStruct`` inputs
(``ppo_jax.memory_estimate.estimate``: rollout generation with its KV cache, the policy's and the reference's
forward passes over the whole batch, the loss's forward and backward, Adam), then XLA's memory analysis of the
compiled program is read: bytes per device, on this machine's backend (a CPU's buffer assignment can differ
from a GPU's; ``--backend`` is recorded in the JSON).

The batch (stated in every table): ``--prompts`` prompts x ``--samples`` responses (default 8 x 8 = 64
sequences), prompts of ``--prompt-len`` tokens (128), responses of ``--response-len`` tokens (512), the copy
problem with the model's vocabulary (its verifier costs nothing), GRPO (group-normalised advantages,
seq-mean-token-mean, k3 KL in the loss; LmConfig's defaults), ``--minibatches`` minibatches (1: all 64
sequences in one gradient step), one epoch, one run (seed).

Rows (``rows()``): float32; bfloat16 compute with float32 master weights; + remat; + micro-batches
(``--micro-batches``, default 4 per minibatch); then on top of that LoRA (``--lora-rank``, default 16, adapters on
every projection: no gradient or Adam state for the base), and FSDP over all devices (full fine-tuning; only with
several devices: parameters, Adam state, reference split over ``fsdp``, the batch over its rows).

On a CPU backend XLA computes bfloat16 matmuls in float32 (its buffers too), so the bfloat16 row equals the
float32 one there; a GPU's or TPU's estimate shows the difference.

    XLA_FLAGS=--xla_force_host_platform_device_count=8 python scripts/lm_memory_table.py \
        --out docs/results/lm_memory_table.json
    python scripts/lm_memory_table.py --models smollm2-135m --response-len 64 --out /tmp/memory.json   # quick
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import time
from pathlib import Path

import jax

from ppo_jax.lm import decoder
from ppo_jax.lm.checkpoint_vocab import engine_config
from ppo_jax.lm.config import LmConfig
from ppo_jax.lm.decoder_config import from_hf
from ppo_jax.lm.memory_switches import decoder_dtypes
from ppo_jax.lm.models import MODELS, Architecture
from ppo_jax.lm.task import LM
from ppo_jax.memory_estimate import estimate
from ppo_jax.runs import make_keys
from ppo_jax.sweep.plan import format_bytes

# config.json of each model as published on the Hugging Face hub (the keys the decoder reads).
CONFIGS = {
    "smollm2-135m": {  # HuggingFaceTB/SmolLM2-135M
        "model_type": "llama",
        "vocab_size": 49152,
        "hidden_size": 576,
        "intermediate_size": 1536,
        "num_hidden_layers": 30,
        "num_attention_heads": 9,
        "num_key_value_heads": 3,
        "max_position_embeddings": 8192,
        "rms_norm_eps": 1e-5,
        "rope_theta": 100000,
        "tie_word_embeddings": True,
        "attention_bias": False,
        "hidden_act": "silu",
        "bos_token_id": 0,
        "eos_token_id": 0,
        "torch_dtype": "bfloat16",
    },
    "qwen2.5-0.5b": {  # Qwen/Qwen2.5-0.5B
        "model_type": "qwen2",
        "vocab_size": 151936,
        "hidden_size": 896,
        "intermediate_size": 4864,
        "num_hidden_layers": 24,
        "num_attention_heads": 14,
        "num_key_value_heads": 2,
        "max_position_embeddings": 32768,
        "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0,
        "tie_word_embeddings": True,
        "use_sliding_window": False,
        "hidden_act": "silu",
        "bos_token_id": 151643,
        "eos_token_id": 151643,
        "torch_dtype": "bfloat16",
    },
    "qwen2.5-1.5b": {  # Qwen/Qwen2.5-1.5B
        "model_type": "qwen2",
        "vocab_size": 151936,
        "hidden_size": 1536,
        "intermediate_size": 8960,
        "num_hidden_layers": 28,
        "num_attention_heads": 12,
        "num_key_value_heads": 2,
        "max_position_embeddings": 131072,
        "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0,
        "tie_word_embeddings": True,
        "use_sliding_window": False,
        "hidden_act": "silu",
        "bos_token_id": 151643,
        "eos_token_id": 151643,
        "torch_dtype": "bfloat16",
    },
}


@dataclasses.dataclass(frozen=True)
class Row:
    """One row of the table: a name and the LmConfig fields it sets (on top of the batch's)."""

    name: str
    fields: dict


def rows(micro_batches: int, devices: int, lora_rank: int) -> list[Row]:
    """The table's rows, each adding a switch to the one before; LoRA and FSDP each on top of remat + micro-batches
    (FSDP only with more than one device: run under ``XLA_FLAGS=--xla_force_host_platform_device_count=8``)."""
    mixed = {"param_dtype": "float32", "compute_dtype": "bfloat16"}
    lean = {**mixed, "remat": True, "micro_batches": micro_batches}
    table = [
        Row("float32", {"param_dtype": "float32", "compute_dtype": "float32"}),
        Row("bfloat16 compute, float32 master weights", mixed),
        Row("+ remat", {**mixed, "remat": True}),
        Row(f"+ {micro_batches} micro-batches", lean),
        Row(f"+ LoRA rank {lora_rank} (all projections)", {**lean, "lora_rank": lora_rank}),
    ]
    if devices > 1:
        table.append(Row(f"+ FSDP over {devices} devices (full fine-tuning)", {**lean, "mesh": f"fsdp={devices}"}))
    return table


def register_shapes(name: str, hf: dict) -> str:
    """A ``model`` value whose policy and value model are the decoder of config.json ``hf`` (fresh weights: only
    their shapes are used), in the run's dtypes and remat; returns it."""

    def build(cfg, vocab, out_dim, *, head_gain=1.0):
        config = engine_config(from_hf(hf, where=name))
        config = dataclasses.replace(config, **decoder_dtypes(cfg, "float32"))
        return decoder.Decoder(config, out_dim=0 if out_dim == vocab else out_dim, head_gain=head_gain, remat=cfg.remat)

    key = f"shapes-{name}"
    if key not in MODELS.names():
        MODELS.register(key, Architecture(build, f"{name} shapes", decoder_family=True))
    return key


def config_for(model: str, vocab: int, args, fields: dict) -> LmConfig:
    return LmConfig(
        problem="copy",
        model=model,
        vocab_size=vocab,
        prompt_len=args.prompt_len,
        max_response_len=args.response_len,
        num_prompts=args.prompts,
        group_size=args.samples,
        num_minibatches=args.minibatches,
        update_epochs=1,
        num_updates=1,
        sft_steps=0,
        eval_prompts=0,
        **fields,
    )


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--prompt-len", type=int, default=128)
    parser.add_argument("--response-len", type=int, default=512)
    parser.add_argument("--minibatches", type=int, default=1)
    parser.add_argument("--micro-batches", type=int, default=4)
    parser.add_argument("--lora-rank", type=int, default=16)
    parser.add_argument("--out", type=Path, default=Path("bench_results/lm_memory_table.json"))
    args = parser.parse_args(argv)

    batch = (
        f"{args.prompts} prompts x {args.samples} samples, prompt {args.prompt_len} + response {args.response_len} "
        f"tokens, {args.minibatches} minibatches, 1 epoch, 1 run; backend {jax.default_backend()}"
    )
    results = []
    for name in args.models:
        model = register_shapes(name, CONFIGS[name])
        params = decoder.parameter_count(decoder.Decoder(from_hf(CONFIGS[name])))
        for row in rows(args.micro_batches, jax.device_count(), args.lora_rank):
            cfg = config_for(model, CONFIGS[name]["vocab_size"], args, row.fields)
            start = time.perf_counter()
            memory = estimate(LM, LM.validate(cfg), make_keys([0]))
            seconds = time.perf_counter() - start
            results.append(
                {"model": name, "parameters": params, "row": row.name, "fields": row.fields, **memory._asdict()}
            )
            print(f"{name} | {row.name}: {memory.describe()} ({seconds:.0f} s to compile)", flush=True)

    print(f"\nOne GRPO update, estimated memory per device ({batch}):\n")
    print("| model | parameters | setting | total | arguments | temporaries |")
    print("|---|---:|---|---:|---:|---:|")
    for r in results:
        print(
            f"| {r['model']} | {r['parameters'] / 1e6:.0f}M | {r['row']} | {format_bytes(r['total'])} | "
            f"{format_bytes(r['arguments'])} | {format_bytes(r['temporaries'])} |"
        )
    out = {
        "batch": batch,
        "settings": vars(args) | {"out": str(args.out)},
        "backend": jax.default_backend(),
        "device": str(jax.devices()[0].device_kind),
        "jax": jax.__version__,
        "python": platform.python_version(),
        "results": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2))
    print(f"\nwrote {args.out}")
    return out


if __name__ == "__main__":
    main()
