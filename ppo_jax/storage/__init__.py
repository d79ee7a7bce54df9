"""Everything ppo_jax writes to disk, written one way.

    atomic.py      atomic files and directories (temporary sibling + rename; the old one restored on failure),
                   the refusal to overwrite what a user produced, and the one JSON layout
    provenance.py  metadata.json: versions, devices, host, command, git commit, task
    run_dir.py     the run directory of ``ppo-jax train`` / ``ppo-jax rlhf`` (any task)

The sweep directory (``ppo_jax.sweep.sweep_dir``) and the report directory
(``ppo_jax.report.build``) are written with ``atomic`` too.
"""
