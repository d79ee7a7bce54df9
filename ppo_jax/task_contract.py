"""``Task``: what a sweep, a run directory and a report need from one kind of training.

PPO on an environment is one task (``ppo_jax.rl.task.PPO``), token-level RLHF on
the copy task another (``ppo_jax.lm.task.RLHF``); ``ppo_jax.task_registry`` lists them.
A task is a small record:

* its name (in specs, config.json, metadata) and the ``ppo-jax`` command that
  trains it (``command``: "train" for ppo, "rlhf" for rlhf),
* its config class (a ``ppo_jax.config_fields.ConfigBase`` dataclass: which
  fields are static and which traced is read off the class),
* its metric names and which one is *the score* (what a report ranks and
  normalizes), with the share of final updates that define a run's final value,
* what its settings may share: ``shared_fields`` are fields that only affect
  the shared part (RLHF's pretrained SFT and reward models),
* and its engine, a module with the jittable, vmappable functions::

      prepare_shared(cfg, key) -> pytree | None       # e.g. pretraining; None: nothing shared
      train(cfg, key, shared=None, *, on_update=None, report_every=1) -> output with .metrics[name]: [num_updates]
      init(cfg, key, shared) -> carry                  # train = init, step over the updates, finish
      step(cfg, carry, update_idx, shared) -> (carry, {name: scalar})
      finish(cfg, carry, metrics) -> output            # metrics: {} when they went to disk (ppo_jax.segments)
      evaluate(cfg, output, key, shared) -> {name: float32[]}  # per-run evaluation (eval_names); {} if none
      params_tree(output, shared) -> nested dict of arrays   # what params.msgpack holds

and optionally::

      describe_shared(cfg, shared) -> {name: float}     # what the CLI prints and records about it
      evaluate_episodes(cfg, output, key, num_episodes)  # per-episode evaluation (PPO: an Evaluation)
      checked_state(carry) -> pytree                    # the part of the carry that must stay finite (default: all)
      place(cfg, shared) -> shared                      # shared (host arrays) placed for the programs (LM: a mesh)
      export_policies(cfg, output, seeds, path, shared) -> [Path]  # trained policies in a format other tools load

Every task's metrics end with ``non_finite`` (``ppo_jax.final_values.NON_FINITE``):
``step`` does not return it; ``ppo_jax.scan_updates``, the loop over updates of
every train, segment and sweep program, adds it from the carry and the loss.

``on_update(update_idx, metrics)`` is called on the host once per update of every
run (through ``jax.debug.callback``; under ``vmap`` once per run), with that
update's scalar metrics, or with ``report_every=k`` only after every k-th update
and the last (``ppo_jax.progress.report_update``); ``None`` puts no callback in
the program.

The engine is imported on first use, not with the task (``engine`` is a function
holding the import, so a reader follows it from the task to the module): it imports gymnax, which
starts a JAX backend, and ``jax.distributed.initialize()`` must come first; the
task's names (for the CLI, specs and reports) are readable without it.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from types import ModuleType

from ppo_jax.config_fields import static_fields, traced_fields


@dataclasses.dataclass(frozen=True)
class Task:
    name: str
    """The task's id in specs and metadata: "ppo", "rlhf"."""
    config_class: type
    """The config dataclass (PPOConfig, RlhfConfig)."""
    metric_names: tuple[str, ...]
    """Per-update metrics, in table order: what ``step`` returns, then ``non_finite`` (added by ``scan_updates``)."""
    score: str
    """The metric a run is judged by (its final value: mean over the last ``final_fraction`` of updates)."""
    final_fraction: float
    """Share of a run's last updates whose mean is a metric's final value."""
    engine: Callable[[], ModuleType]
    """Returns the engine module (see the module docstring), importing it on first call: the task's module
    defines it as a function holding ``from ppo_jax.<pkg> import train``."""
    score_label: str = ""
    """The score in words, for figures and tables ("episodic return")."""
    eval_names: tuple[str, ...] = ()
    """Per-run evaluation scalars ``evaluate`` returns, on a run's last table row."""
    summed_metrics: tuple[str, ...] = ()
    """Metrics summed (not averaged) over a logging window (counts, e.g. episodes)."""
    reported: tuple[str, ...] = ()
    """Metrics whose final values the CLI prints per seed (default: the score)."""
    env_field: str | None = None
    """The config field naming the environment (PPO: env); None: the task is its own environment."""
    env_id: str | None = None
    """The environment column of a task without env_field (RLHF: "copy")."""
    shared_fields: tuple[str, ...] = ()
    """Fields that only affect ``prepare_shared``: a sweep that shares it cannot vary them."""
    steps_per_update_fields: tuple[str, ...] = ()
    """Config fields whose product is the samples one update consumes (env steps; RLHF: sequences)."""
    command: str = ""
    """The ``ppo-jax`` subcommand that trains it and resumes its runs ("train" for ppo, "rlhf"); empty: the task's name."""
    unit: str = ""
    """What ``steps_per_update`` counts; empty: env steps with an env_field, else sequences."""
    score_bounds: tuple[float, float] | None = None
    """Bounds of the score on every env of the task (lm: sampled pass@1 in [0, 1]): a report normalizes by them
    where no reference score is given; None: a reference score per env (``ppo_jax.report.scores``)."""
    score_bounds_source: str = ""
    """What the bounds are, in words (a report's normalizers say it)."""
    presets: str = ""
    """Module of the task's named presets (``CHOICES``, ``apply_preset(name, cfg)``): a spec's ``preset`` axis."""
    memory_hint: str = "e.g. num_envs, num_steps"
    """What lowers a run's memory, in the words of a refusal over the memory budget (``ppo_jax.sweep.program``)."""

    def __post_init__(self):
        if not self.command:
            object.__setattr__(self, "command", self.name)

    # ----- derived from the config class -----
    @property
    def traced_fields(self) -> tuple[str, ...]:
        return traced_fields(self.config_class)

    @property
    def static_fields(self) -> tuple[str, ...]:
        return static_fields(self.config_class)

    @property
    def field_names(self) -> tuple[str, ...]:
        return self.static_fields + self.traced_fields

    def env_of(self, cfg) -> str:
        """The environment id of ``cfg`` (the table's ``env`` column)."""
        return getattr(cfg, self.env_field) if self.env_field else str(self.env_id)

    def steps_per_update(self, cfg) -> int:
        steps = 1
        for name in self.steps_per_update_fields:
            steps *= int(getattr(cfg, name))
        return steps

    # ----- the engine -----
    def engine_module(self) -> ModuleType:
        return self.engine()

    def validate(self, cfg):
        """``cfg`` checked (ConfigError with how to fix it, before anything compiles) and returned."""
        return self.engine_module().check(cfg)

    def prepare_shared(self, cfg, key):
        return self.engine_module().prepare_shared(cfg, key)

    def train(self, cfg, key, shared=None, *, on_update=None, report_every: int = 1):
        return self.engine_module().train(cfg, key, shared, on_update=on_update, report_every=report_every)

    def init(self, cfg, key, shared=None):
        return self.engine_module().init(cfg, key, shared)

    def step(self, cfg, carry, update_idx, shared=None):
        return self.engine_module().step(cfg, carry, update_idx, shared)

    def finish(self, cfg, carry, metrics):
        return self.engine_module().finish(cfg, carry, metrics)

    def evaluate(self, cfg, output, key, shared=None) -> dict:
        """The engine's evaluation; ``shared`` (what ``prepare_shared`` made) is needed where the output is not the
        whole policy (LM runs with LoRA: adapters on the shared SFT model)."""
        return self.engine_module().evaluate(cfg, output, key, shared)

    def params_tree(self, output, shared) -> dict:
        return self.engine_module().params_tree(output, shared)

    def export(self, cfg, output, seeds, path, shared=None) -> list:
        """The engine's ``export_policies(cfg, output, seeds, path, shared)`` (trained policies other tools load), if
        any."""
        export = getattr(self.engine_module(), "export_policies", None)
        return [] if export is None else export(cfg, output, seeds, path, shared)

    def place(self, cfg, shared):
        """``shared`` where the run's programs take it: the engine's ``place`` (an LM run's ``--mesh``), else as it is."""
        place = getattr(self.engine_module(), "place", None)
        return shared if place is None or shared is None else place(cfg, shared)

    def describe_shared(self, cfg, shared) -> dict:
        describe = getattr(self.engine_module(), "describe_shared", None)
        return {} if describe is None else describe(cfg, shared)

    def checked_state(self, carry):
        """The part of a run's carry whose floating-point leaves must stay finite (``non_finite``): the engine's, or all."""
        checked = getattr(self.engine_module(), "checked_state", None)
        return carry if checked is None else checked(carry)

    def evaluate_episodes(self, cfg, output, key, num_episodes: int):
        """The engine's per-episode evaluation, or None if it has none."""
        evaluate = getattr(self.engine_module(), "evaluate_episodes", None)
        return None if evaluate is None else evaluate(cfg, output, key, num_episodes)

    def preset_names(self) -> tuple[str, ...]:
        """The presets a spec may name (``preset:`` in base or an axis); () if the task has none."""
        return tuple(importlib.import_module(self.presets).CHOICES) if self.presets else ()

    def apply_preset(self, name: str, cfg):
        """``cfg`` with preset ``name``'s fields set (the preset module's ``apply_preset``)."""
        return importlib.import_module(self.presets).apply_preset(name, cfg)

    @property
    def sample_unit(self) -> str:
        """What ``steps_per_update`` counts: env steps, or (a task without an env) sequences."""
        return self.unit or ("env steps" if self.env_field else "sequences")

    def num_updates(self, cfg) -> int:
        return int(cfg.num_updates)
