"""The errors ppo_jax raises for input that cannot run, each with a message that says how to fix it.

Every one is a ``ValueError`` subclass of ``ConfigError``, so the CLI turns any of
them into ``error: ...`` on stderr and exit status 2 — for input, before anything compiles.
"""

from __future__ import annotations

import difflib


class ConfigError(ValueError):
    """A configuration that cannot run; the message says what is wrong and how to fix it."""


class RelationError(ConfigError):
    """A ConfigError about two fields together (clip_cov_high below clip_cov_low): a sweep spec checks it on whole
    settings, not on each axis value against the base (``ppo_jax.sweep.spec_axes.validated``)."""


class SpecError(ConfigError):
    """A sweep spec that cannot run; the message says where (file, line) and how to fix it."""


class ReportError(ConfigError):
    """A report input that cannot be used; the message names the file and how to fix it."""


class CorruptFileError(ConfigError):
    """A file in a run or sweep directory that cannot be read back (truncated, garbled); the message names it and what to do."""


class DirectoryInUse(ConfigError):
    """An output directory another live process is writing; the message names that process (host, pid, start time)."""


def close_matches(name: str, choices) -> str:
    """' Did you mean: a, b?' for up to 3 close matches of ``name`` among ``choices``, else ''."""
    matches = difflib.get_close_matches(str(name), list(choices), n=3, cutoff=0.5)
    return f" Did you mean: {', '.join(matches)}?" if matches else ""
