"""Everything ppo_jax writes to disk, written one way.

    atomic.py      atomic files and directories (temporary sibling + rename; the old one restored on failure),
                   the refusal to overwrite what a user produced, and the one JSON layout
    provenance.py  metadata.json: versions, devices, host, command, git commit, task
    run_dir.py     the run directory of ``ppo-jax train`` / ``ppo-jax rlhf`` (any task)
    live_run.py    that directory while the run writes it, and ``--resume``
    checkpoints.py Orbax checkpoints of a run's whole state
    locks.py       one writer per output directory (flock), naming the holder to a second one
    corrupt.py     files that cannot be read back: a one-line error naming them, moved aside into DIR/corrupt/

The sweep directory (``ppo_jax.sweep.sweep_dir``) and the report directory
(``ppo_jax.report.build``) are written with ``atomic`` too.
"""
