"""The models of a run, by ``cfg.model`` (``MODELS``): a Llama-family decoder (``decoder.py``), the GPT-2-style
transformer (``transformer.py``) or the GRU (``gru.py``).

Every architecture's module has one interface, which this module dispatches on the
model's class (the module defining it): ``init_params(model, key)``, ``run(model, params, tokens [B, T])
-> [B, T, out_dim]`` (teacher forcing) and ``generate(model, params, key, prompt
[B, P], L, knobs) -> [B, L]`` (``sampling.sample`` with the knobs, PAD after the first EOS), and ``sample``
with the same arguments: those tokens and the log-prob ``[B, L]`` each was drawn with (0 after the EOS). A run
has a policy (actor and reference; ``out_dim = vocab``, head gain 0.01) and a
scalar model (critic and reward model; one output), of one architecture.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from types import ModuleType
from typing import NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp

from ppo_jax.errors import ConfigError
from ppo_jax.lm import checkpoint_model, decoder, gru, problems, tokens, transformer
from ppo_jax.lm.checkpoint_model import checkpoint_config, is_checkpoint_path
from ppo_jax.lm.decoder_config import DTYPES, DecoderConfig
from ppo_jax.lm.memory_switches import decoder_dtypes
from ppo_jax.lm.rope import RopeParams
from ppo_jax.lm.sampling import SamplingParams
from ppo_jax.registry import Registry


class Models(NamedTuple):
    policy: nn.Module  # actor and reference: logits [V]
    scalar: nn.Module  # critic and reward model: one output


class Architecture(NamedTuple):
    build: Callable
    """``build(cfg, vocab, out_dim, **head) -> nn.Module`` (head: ``head_gain`` of the policy)."""
    doc: str
    reference: str = ""
    reads: tuple[str, ...] = ()
    check: Callable = lambda cfg: None
    """``check(cfg)``: ConfigError for sizes it cannot build, before anything compiles."""
    decoder_family: bool = False
    """Builds ``decoder.Decoder`` models: remat and the dtypes apply (``memory_switches``)."""


def _gru(cfg, vocab, out_dim, **head):
    return gru.SeqModel(vocab_size=vocab, embed_dim=cfg.embed_dim, hidden_dim=cfg.hidden_dim, out_dim=out_dim, **head)


def _transformer(cfg, vocab, out_dim, **head):
    return transformer.Decoder(
        out_dim=out_dim,
        **head,
        vocab_size=vocab,
        max_len=problems.prompt_len(cfg) + problems.response_len(cfg),
        model_dim=cfg.model_dim,
        num_layers=cfg.num_layers,
        num_heads=cfg.num_heads,
    )


def lab_decoder_config(cfg) -> DecoderConfig:
    """The lab's tiny member of the Llama family: ``model_dim``, ``num_layers``, ``num_heads`` (one key-value head
    each), a SwiGLU width of ``8/3 * model_dim`` (the parameter count of a ``4 * model_dim`` GELU MLP; Touvron et
    al. 2023), untied embeddings, RoPE base 10000, the problem's vocabulary with its PAD and EOS."""
    return DecoderConfig(
        model_type="llama",
        vocab_size=problems.vocab_size(cfg),
        hidden_size=cfg.model_dim,
        intermediate_size=8 * cfg.model_dim // 3,
        num_layers=cfg.num_layers,
        num_heads=cfg.num_heads,
        num_kv_heads=cfg.num_heads,
        head_dim=cfg.model_dim // cfg.num_heads,
        max_position_embeddings=problems.prompt_len(cfg) + problems.response_len(cfg),
        rms_norm_eps=1e-6,
        rope=RopeParams("default", 10000.0),
        eos_token_ids=(tokens.EOS,),
        pad_token_id=tokens.PAD,
        **decoder_dtypes(cfg, "float32"),
    )


def _decoder(cfg, vocab, out_dim, *, head_gain=1.0):
    out_dim = 0 if out_dim == vocab else out_dim
    return decoder.Decoder(lab_decoder_config(cfg), out_dim=out_dim, head_gain=head_gain, remat=cfg.remat)


def _check_transformer(cfg) -> None:
    if cfg.model_dim % cfg.num_heads:
        raise ConfigError(
            f"num_heads={cfg.num_heads} does not divide model_dim={cfg.model_dim}; "
            f"choose num_heads among {[d for d in range(1, cfg.model_dim + 1) if cfg.model_dim % d == 0]}."
        )


CHECKPOINT = Architecture(
    checkpoint_model.build,
    "a Llama / Qwen checkpoint directory (config.json, safetensors): its sizes and weights",
    "Touvron et al. 2023; Yang et al. 2024, 2025",
    (),
    checkpoint_model.check,
    decoder_family=True,
)


class ArchitectureTable(Registry):
    """``MODELS``: an architecture by name, or ``CHECKPOINT`` for a value that is a checkpoint directory."""

    def get(self, name, default=None):
        return CHECKPOINT if is_checkpoint_path(name) and name not in self.names() else super().get(name, default)

    def __contains__(self, name) -> bool:
        return super().__contains__(name) or is_checkpoint_path(name)

    def __getitem__(self, name: str) -> Architecture:
        return self.get(name) if name in self else super().__getitem__(name)

    def check(self, value) -> None:
        if value not in self.names() and is_checkpoint_path(value):
            checkpoint_config(value)
            return
        super().check(value)

    def inert(self, value: str) -> dict[str, str]:
        if value in self.names() or not is_checkpoint_path(value):
            return super().inert(value)
        why = f"the checkpoint's config.json sets the sizes (model: {value})"
        return dict.fromkeys(self.read_by_any(), why)


def _check_decoder(cfg) -> None:
    _check_transformer(cfg)
    lab_decoder_config(cfg)  # ConfigError for an odd head dimension


MODELS: ArchitectureTable = ArchitectureTable("model", "model architecture")
MODELS.register(
    "decoder",
    Architecture(
        _decoder,
        "Llama-family decoder (RMSNorm, RoPE, SwiGLU), the lab's sizes",
        "Touvron et al. 2023",
        ("model_dim", "num_layers", "num_heads"),
        _check_decoder,
        decoder_family=True,
    ),
)
MODELS.register(
    "transformer",
    Architecture(
        _transformer,
        "causal decoder with a key-value cache",
        "Vaswani et al. 2017; Radford et al. 2019",
        ("model_dim", "num_layers", "num_heads"),
        _check_transformer,
    ),
)
MODELS.register("gru", Architecture(_gru, "GRU over tokens", "Cho et al. 2014", ("embed_dim", "hidden_dim")))


def is_decoder_family(cfg) -> bool:
    """Whether ``cfg.model`` is a Llama-family decoder (the lab's, or a checkpoint directory): the models with remat
    and a choice of dtypes (``memory_switches``)."""
    return MODELS[cfg.model].decoder_family


def make_models(cfg) -> Models:
    vocab = problems.vocab_size(cfg)
    build = MODELS[cfg.model].build
    return Models(build(cfg, vocab, vocab, head_gain=0.01), build(cfg, vocab, 1))


def _module(model: nn.Module) -> ModuleType:
    """The module that defines ``model``'s class: it has the ``init_params``, ``run`` and ``generate`` of its models."""
    return sys.modules[type(model).__module__]


def init_params(model: nn.Module, key: jax.Array):
    return _module(model).init_params(model, key)


def run(model: nn.Module, params, tokens: jax.Array) -> jax.Array:
    """Outputs ``[B, T, out_dim]`` for ``tokens [B, T]``: row t is computed from tokens ``0..t``."""
    return _module(model).run(model, params, tokens)


def generate(
    model: nn.Module, params, key: jax.Array, prompt: jax.Array, max_response_len: int, knobs: SamplingParams
) -> jax.Array:
    """Responses ``[B, L]`` for ``prompt [B, P]`` drawn by ``sampling.sample`` with ``knobs``; PAD after the first EOS."""
    return _module(model).generate(model, params, key, prompt, max_response_len, knobs)


def sample(
    model: nn.Module, params, key: jax.Array, prompt: jax.Array, max_response_len: int, knobs: SamplingParams
) -> tuple[jax.Array, jax.Array]:
    """``generate``'s responses ``[B, L]`` (the same tokens for the same key) and the log-prob ``[B, L]`` (float32)
    each was drawn with: of ``sampling.sample``'s tempered, truncated distribution (what ``sampling.token_log_prob``
    scores), computed by the sampler itself; 0 after the first EOS."""
    return tuple(_module(model).sample(model, params, key, prompt, max_response_len, knobs))


SAMPLER_DTYPES = DTYPES
"""The compute dtypes a rollout sampler may run in (``cfg.sampler_dtype``; "" is the training compute dtype)."""


def check_sampler_dtype(cfg) -> None:
    """ConfigError for a ``sampler_dtype`` outside ``SAMPLER_DTYPES``, or on a model without compute dtypes."""
    if not cfg.sampler_dtype:
        return
    if cfg.sampler_dtype not in SAMPLER_DTYPES:
        raise ConfigError(
            f"sampler_dtype {cfg.sampler_dtype!r} is not a compute dtype; choose one of {', '.join(SAMPLER_DTYPES)} "
            '(or "" to sample in the training compute dtype).'
        )
    if not is_decoder_family(cfg):
        raise ConfigError(
            f"sampler_dtype={cfg.sampler_dtype} needs a model with a compute dtype: model decoder or a checkpoint "
            f"directory (model {cfg.model} computes in float32 only); leave sampler_dtype empty."
        )


def sampler_model(cfg, policy: nn.Module) -> nn.Module:
    """The policy as the rollout samples with it: ``policy`` computing in ``cfg.sampler_dtype`` (the same parameters;
    decoder models), or ``policy`` itself when sampler_dtype is ""."""
    if not cfg.sampler_dtype:
        return policy
    return dataclasses.replace(policy, config=dataclasses.replace(policy.config, compute_dtype=cfg.sampler_dtype))


def response_outputs(model: nn.Module, params, sequence: jax.Array, prompt_len: int) -> jax.Array:
    """``[B, L, out_dim]``: the output that predicts (or values the state before) each response token.

    Row ``t`` is computed from the prompt and response tokens ``0..t-1``: logits of
    pi(. | s_t) for the actor, V(s_t) for the critic.
    """
    return run(model, params, sequence[:, :-1])[:, prompt_len - 1 :]


def score_at(outputs: jax.Array, position: jax.Array) -> jax.Array:
    """``outputs [B, T, 1]`` read at ``position [B]``: ``[B]``."""
    return jnp.take_along_axis(outputs[..., 0], position[:, None].astype(jnp.int32), axis=1)[:, 0]
