"""``DecoderConfig``: the shape of a Llama / Qwen-family decoder, read from and written to Hugging Face's config.json.

One frozen (hashable, so static under ``jit``) dataclass covers the family:
Llama 3 and SmolLM2 (``model_type: llama``), Qwen2 / Qwen2.5 (``qwen2``: q/k/v
projections with a bias) and Qwen3 (``qwen3``: RMSNorm over each query and key
head). ``FAMILIES`` is the table of model types; ``ROPE_TYPES`` (``rope.py``)
the table of rotary-embedding variants.

``from_hf(json_dict)`` reads both key formats of config.json: transformers 4.x's
``rope_theta`` / ``rope_scaling`` (as the published checkpoints are written) and
5.x's ``rope_parameters``. A field this package cannot honour (a sliding window,
an activation other than SiLU, an MLP bias, a rope type it does not implement) is
a ``CheckpointError`` naming it, never a silently different model.
``to_hf()`` writes the 4.x format, which both transformers 4.x and 5.x load.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

from ppo_jax.errors import ConfigError
from ppo_jax.lm.rope import ROPE_TYPES, RopeParams
from ppo_jax.registry import Registry


class CheckpointError(ConfigError):
    """A checkpoint directory that cannot be loaded; the message names the file and what is wrong."""


class Family(NamedTuple):
    """What a ``model_type`` changes in the shared decoder."""

    qkv_bias: bool | None  # None: the config's ``attention_bias`` says
    o_bias: bool | None  # None: the config's ``attention_bias`` says
    qk_norm: bool
    doc: str
    reference: str
    architecture: str  # the ``architectures`` entry transformers reads back
    fixed_keys: tuple[tuple[str, object], ...] = ()  # config.json keys this package only supports at one value


FAMILIES: Registry[Family] = Registry("model_type", "decoder family")
FAMILIES.register(
    "llama",
    Family(
        None,
        None,
        False,
        "Llama 2/3, SmolLM2",
        "Touvron et al. 2023; Dubey et al. 2024",
        "LlamaForCausalLM",
        (("mlp_bias", False),),
    ),
)
_NO_SLIDING_WINDOW = (("use_sliding_window", False),)
FAMILIES.register(
    "qwen2",
    Family(
        True, False, False, "Qwen2, Qwen2.5: q/k/v bias", "Yang et al. 2024", "Qwen2ForCausalLM", _NO_SLIDING_WINDOW
    ),
)
FAMILIES.register(
    "qwen3",
    Family(None, None, True, "Qwen3: q/k RMSNorm per head", "Yang et al. 2025", "Qwen3ForCausalLM", _NO_SLIDING_WINDOW),
)

DTYPES = ("float32", "bfloat16")


@dataclasses.dataclass(frozen=True)
class DecoderConfig:
    """Sizes and switches of one decoder; every field static."""

    model_type: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int  # divides num_heads (grouped-query attention, Ainslie et al. 2023)
    head_dim: int
    max_position_embeddings: int
    rms_norm_eps: float = 1e-6
    rope: RopeParams = RopeParams()
    tie_word_embeddings: bool = False
    qkv_bias: bool = False
    o_bias: bool = False
    qk_norm: bool = False
    bos_token_id: int | None = None
    eos_token_ids: tuple[int, ...] = ()
    pad_token_id: int | None = None
    param_dtype: str = "float32"
    compute_dtype: str = "float32"

    def __post_init__(self):
        FAMILIES.check(self.model_type)
        for name in ("param_dtype", "compute_dtype"):
            if getattr(self, name) not in DTYPES:
                raise ConfigError(f"{name} {getattr(self, name)!r} is not supported; choose one of {DTYPES}.")
        if self.num_heads % self.num_kv_heads:
            raise ConfigError(
                f"num_key_value_heads {self.num_kv_heads} does not divide num_attention_heads {self.num_heads}."
            )
        if self.head_dim % 2:
            raise ConfigError(f"head_dim {self.head_dim} is odd; rotary embeddings rotate pairs of dimensions.")

    @property
    def group_size(self) -> int:
        """Query heads per key-value head."""
        return self.num_heads // self.num_kv_heads

    @property
    def fill_token_id(self) -> int:
        """What a finished sequence is padded with: pad_token_id, else the first EOS (as transformers' generate)."""
        if self.pad_token_id is not None:
            return self.pad_token_id
        return self.eos_token_ids[0] if self.eos_token_ids else 0

    def to_hf(self) -> dict:
        """config.json in the transformers 4.x key format (``rope_theta``, ``rope_scaling``)."""
        out = {
            "architectures": [FAMILIES[self.model_type].architecture],
            "model_type": self.model_type,
            "vocab_size": self.vocab_size,
            "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "num_hidden_layers": self.num_layers,
            "num_attention_heads": self.num_heads,
            "num_key_value_heads": self.num_kv_heads,
            "head_dim": self.head_dim,
            "max_position_embeddings": self.max_position_embeddings,
            "rms_norm_eps": self.rms_norm_eps,
            "hidden_act": "silu",
            "tie_word_embeddings": self.tie_word_embeddings,
            "bos_token_id": self.bos_token_id,
            "eos_token_id": list(self.eos_token_ids) if len(self.eos_token_ids) != 1 else self.eos_token_ids[0],
            "pad_token_id": self.pad_token_id,
            "torch_dtype": self.param_dtype,
            **self.rope.to_hf(),
        }
        family = FAMILIES[self.model_type]
        if family.qkv_bias is None:  # the family reads its q/k/v (and o) bias from attention_bias
            out["attention_bias"] = self.qkv_bias
        return out | dict(family.fixed_keys)


def _require(hf: dict, key: str, where: str):
    if key not in hf or hf[key] is None:
        raise CheckpointError(f"{where}: the key {key!r} is missing; a {hf.get('model_type')} config.json needs it.")
    return hf[key]


def _refuse(where: str, field: str, value, why: str):
    raise CheckpointError(f"{where}: {field} = {value!r} is not supported ({why}).")


def _token_ids(value) -> tuple[int, ...]:
    if value is None:
        return ()
    return tuple(int(v) for v in value) if isinstance(value, list) else (int(value),)


def from_hf(hf: dict, *, where: str = "config.json", compute_dtype: str | None = None) -> DecoderConfig:
    """A ``DecoderConfig`` from a parsed config.json (4.x or 5.x keys); CheckpointError naming any field it cannot honour.

    ``compute_dtype`` defaults to the checkpoint's parameter dtype.
    """
    model_type = hf.get("model_type")
    if model_type not in FAMILIES.names():
        raise CheckpointError(
            f"{where}: model_type {model_type!r} is not supported; supported: {', '.join(FAMILIES.names())}."
        )
    family = FAMILIES[model_type]
    if hf.get("hidden_act", "silu") != "silu":
        _refuse(where, "hidden_act", hf["hidden_act"], "the family's MLP is SwiGLU; only silu")
    if hf.get("mlp_bias"):
        _refuse(where, "mlp_bias", hf["mlp_bias"], "the MLP projections have no bias here")
    if hf.get("use_sliding_window"):
        _refuse(
            where, "use_sliding_window", True, "sliding-window attention is not implemented; every layer attends to all"
        )
    for layer_type in hf.get("layer_types") or ():
        if layer_type != "full_attention":
            _refuse(where, "layer_types", layer_type, "only full_attention layers are implemented")
    dtype = hf.get("dtype") or hf.get("torch_dtype") or "float32"
    if dtype not in DTYPES:
        _refuse(where, "torch_dtype", dtype, f"parameters load as one of {DTYPES}")
    hidden = int(_require(hf, "hidden_size", where))
    heads = int(_require(hf, "num_attention_heads", where))
    attention_bias = bool(hf.get("attention_bias", False))
    try:
        return DecoderConfig(
            model_type=model_type,
            vocab_size=int(_require(hf, "vocab_size", where)),
            hidden_size=hidden,
            intermediate_size=int(_require(hf, "intermediate_size", where)),
            num_layers=int(_require(hf, "num_hidden_layers", where)),
            num_heads=heads,
            num_kv_heads=int(hf.get("num_key_value_heads") or heads),
            head_dim=int(hf.get("head_dim") or hidden // heads),
            max_position_embeddings=int(hf.get("max_position_embeddings") or 2048),
            rms_norm_eps=float(hf.get("rms_norm_eps", 1e-6)),
            rope=rope_from_hf(hf, where),
            tie_word_embeddings=bool(hf.get("tie_word_embeddings", False)),
            qkv_bias=attention_bias if family.qkv_bias is None else family.qkv_bias,
            o_bias=attention_bias if family.o_bias is None else family.o_bias,
            qk_norm=family.qk_norm,
            bos_token_id=hf.get("bos_token_id"),
            eos_token_ids=_token_ids(hf.get("eos_token_id")),
            pad_token_id=hf.get("pad_token_id"),
            param_dtype=dtype,
            compute_dtype=compute_dtype or dtype,
        )
    except ConfigError as error:
        raise CheckpointError(f"{where}: {error}") from None


def rope_from_hf(hf: dict, where: str) -> RopeParams:
    """The rotary embedding of a config.json: 5.x's ``rope_parameters`` or 4.x's ``rope_theta`` + ``rope_scaling``."""
    if hf.get("rope_parameters"):
        spec = dict(hf["rope_parameters"])
        if "rope_theta" not in spec and all(isinstance(v, dict) for v in spec.values()):
            kinds = set(spec)
            if kinds != {"full_attention"}:
                _refuse(where, "rope_parameters", sorted(kinds), "one rope for full-attention layers only")
            spec = dict(spec["full_attention"])
        theta = spec.pop("rope_theta", hf.get("rope_theta", 10000.0))
    else:
        spec = dict(hf.get("rope_scaling") or {})
        theta = hf.get("rope_theta", 10000.0)
    kind = spec.pop("rope_type", None) or spec.pop("type", None) or "default"
    spec.pop("type", None)
    if kind not in ROPE_TYPES.names():
        _refuse(where, "rope_type", kind, f"implemented: {', '.join(ROPE_TYPES.names())}")
    try:
        return ROPE_TYPES[kind].parse(float(theta), spec)
    except (KeyError, TypeError, ValueError) as error:
        raise CheckpointError(f"{where}: rope {kind!r} parameters {spec}: {error}") from None
