"""``python -m ppo_jax.cli``: the same as the ``ppo-jax`` command."""

import sys

from ppo_jax.cli import main

sys.exit(main())
