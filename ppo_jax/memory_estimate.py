"""The memory of one RL update per device, from the compiled update program on abstract shapes: known before a run.

``estimate(task, cfg, keys)`` compiles the run's segment program (``ppo_jax.segments``: rollout generation with
its KV cache, the reference's and the policy's forward passes, the loss's forward and backward, the optimizer
step, over ``vmap`` of the runs) on ``jax.ShapeDtypeStruct`` inputs: the pretrained models' shapes come from
``jax.eval_shape(task.prepare_shared, ...)``, so no parameter is allocated and nothing is pretrained. XLA's
``memory_analysis()`` of that program (``ppo_jax.sweep.program.memory_bytes``: arguments + outputs + temporaries
- aliased) is the estimate; the arguments hold the training state (parameters, optimizer state) and the shared
reference and reward model, the temporaries the activations, logits and KV cache.

``ppo_jax.runs.run(..., memory_budget=B)`` (``ppo-jax lm/rlhf --memory-budget``) calls it before pretraining,
prints it, refuses an estimate above ``B`` (``check_budget``: a ConfigError, exit status 2, saying what to try)
and reuses the compiled program for the run, so the check costs no second compile.
"""

from __future__ import annotations

import re
from typing import NamedTuple

import jax

from ppo_jax.errors import ConfigError
from ppo_jax.sweep.plan import format_bytes
from ppo_jax.sweep.program import memory_bytes


def as_flags(text: str) -> str:
    """A task's ``memory_hint`` (config field names) in the command line's words: each snake_case name as its flag."""
    return re.sub(r"\b([a-z]+(?:_[a-z]+)+|remat|mesh)\b", lambda m: "--" + m[1].replace("_", "-"), text)


class MemoryEstimate(NamedTuple):
    """XLA's memory analysis of one compiled program, per device, in bytes."""

    total: int  # arguments + outputs + temporaries - aliased (or XLA's peak where it reports one)
    arguments: int  # the training state, the shared models, the config
    outputs: int  # the new training state and the metrics
    temporaries: int  # activations, logits, KV cache, gradients

    def describe(self) -> str:
        return (
            f"{format_bytes(self.total)} per device (arguments {format_bytes(self.arguments)}, outputs "
            f"{format_bytes(self.outputs)}, temporaries {format_bytes(self.temporaries)})"
        )


def of_compiled(compiled: jax.stages.Compiled) -> MemoryEstimate:
    """The ``MemoryEstimate`` of ``compiled`` (zeros where the backend reports no analysis)."""
    stats = compiled.memory_analysis()
    if stats is None:
        return MemoryEstimate(0, 0, 0, 0)
    return MemoryEstimate(
        memory_bytes(compiled),
        int(stats.argument_size_in_bytes),
        int(stats.output_size_in_bytes),
        int(stats.temp_size_in_bytes),
    )


def abstract_shared(task, cfg, seed: int = 0):
    """What ``task.prepare_shared(cfg, key(seed))`` returns, as ``ShapeDtypeStruct`` leaves (None if the task shares
    nothing): traced, not run (a checkpoint's tensors are read, no SFT step is taken)."""
    if not task.shared_fields:
        return None
    shapes = jax.eval_shape(task.prepare_shared, cfg, jax.random.key(seed))
    shapes = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), shapes)  # no weak types: host arrays
    return task.place(cfg, shapes)  # on a --mesh: sharded as the run places them (ppo_jax.lm.sharding)


def compile_abstract(task, cfg, keys, length: int = 1, *, seed: int = 0, **segment_options):
    """``ppo_jax.segments.compile_segments`` on the abstract shared models: the run's programs, nothing allocated."""
    from ppo_jax.segments import compile_segments

    return compile_segments(task, cfg, keys, abstract_shared(task, cfg, seed), length, **segment_options)


def estimate(task, cfg, keys, length: int = 1, **segment_options) -> MemoryEstimate:
    """The per-device memory of ``task``'s update program for the runs of ``keys`` (see the module docstring)."""
    return of_compiled(compile_abstract(task, cfg, keys, length, **segment_options).advance_program)


def check_budget(memory: MemoryEstimate, budget: int, what: str, hint: str) -> None:
    """ConfigError if ``memory`` is over ``budget`` bytes: the estimate, the budget and what to try (``hint``: the
    task's ``memory_hint``)."""
    if memory.total > budget:
        raise ConfigError(
            f"{what} needs an estimated {memory.describe()}, over the memory budget of {format_bytes(budget)} "
            f"(--memory-budget; default: the device's memory). Try {as_flags(hint)}; or raise --memory-budget."
        )


def checked_segments(task, cfg, keys, length: int, budget: int, say, *, seed: int = 0, **segment_options):
    """The run's compiled segments (``compile_abstract``), after saying their estimate and ``check_budget``."""
    segments = compile_abstract(task, cfg, keys, length, seed=seed, **segment_options)
    memory = of_compiled(segments.advance_program)
    say(f"memory: ~{memory.describe()}; budget {format_bytes(budget)} ({segments.compile_seconds:.1f} s to compile)")
    check_budget(memory, budget, f"one update of {len(keys)} run{'s' * (len(keys) > 1)}", task.memory_hint)
    return segments
