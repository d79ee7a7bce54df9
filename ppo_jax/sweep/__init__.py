"""Sweeps of any task: many settings x seeds as one compiled program per group, sharded over devices, resumable.

    from ppo_jax import sweep
    table = sweep.run("experiments/clip_eps.yaml", out="runs/clip_eps")     # a pandas DataFrame
    table = sweep.run({"task": "rlhf", "grid": {"beta": [0.0, 0.1]}, "seeds": 2})

Modules, in the order a sweep uses them:

    spec_yaml.py    YAML 1.2 floats, duplicate keys refused, errors with the line
    spec_values.py  field values checked and normalized per field kind
    spec_pretrain.py  pretrain: its pretraining seeds (one pretrained model each) and per_setting
    spec.py         a spec -> validated settings (refusing axes that change nothing)
    plan.py         groups (one program each), chunks, parts; pure Python
    program.py      the compiled, sharded vmap(task.train) of a group
    table.py        the tidy table and the summary
    sweep_dir.py    the sweep directory: written chunk by chunk, resumable, shared by parts, checked when read
    claims.py       chunks claimed by parts (--part), so that none runs twice
    execute.py      running the chunks of a plan, then merging the table
    runner.py       run, plan_sweep, dry_run
"""

from ppo_jax.sweep.runner import SweepPlan, dry_run, parse_chunk_size, plan_sweep, run
from ppo_jax.sweep.spec import SweepSpec, load_spec
from ppo_jax.sweep.table import format_summary, summarize

__all__ = [
    "run",
    "plan_sweep",
    "dry_run",
    "parse_chunk_size",
    "SweepPlan",
    "load_spec",
    "SweepSpec",
    "summarize",
    "format_summary",
]
