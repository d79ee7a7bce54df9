"""Planning a sweep: groups of settings that share one program, chunks of (setting, seed) pairs, parts.

Pure Python, nothing compiles here. The canonical pair order is env, then
setting_id, then seed, as listed in the spec; a *pair* is
``(index into SweepSpec.settings, seed)``. Pairs whose configs agree in every
static field form a group (one compiled program); a group's pairs are cut into
equal chunks (the last one padded when run), and chunks are numbered group by
group. ``--part i/N`` takes a contiguous, deterministic slice of that list.

With several pretraining seeds (``pretrain: {seeds: [...]}``) each static key gives
one group per pretraining seed, in the order listed, next to each other: the same
pairs, run from that seed's pretrained model. Such groups share one compiled program
(``Group.program``: the first of them), the pretrained model being an argument of it;
with ``per_setting`` the pretraining seed is part of the program, and each group has
its own.
"""

from __future__ import annotations

import math
import re
from typing import Any, NamedTuple

from ppo_jax.config_fields import static_fields
from ppo_jax.errors import SpecError
from ppo_jax.sweep.spec import SweepSpec
from ppo_jax.sweep.spec_values import column_value

Pair = tuple[int, int]  # (index into SweepSpec.settings, seed)


class Group(NamedTuple):
    """Settings that differ only in traced leaves: one compiled program.

    ``cfg`` is the first setting's config (its static fields are the group's);
    ``static`` lists the static fields that differ from the spec's base;
    ``pretrain_seed`` keys the pretrained model its pairs start from; ``program`` is
    the index of the group whose compiled program it runs (its own, or the first
    group of its static fields, from another pretraining seed).
    """

    index: int
    cfg: Any  # the task's config class
    static: dict
    pairs: tuple[Pair, ...]
    pretrain_seed: int = 0
    program: int = 0


class Chunk(NamedTuple):
    """A slice of one group's pairs, run as one call of the group's program and saved as one file."""

    chunk_id: str  # "g000-c00003": group 0, its chunk 3
    group: int
    pairs: tuple[Pair, ...]


def static_key(cfg) -> tuple:
    """The static fields that select a program."""
    return tuple(getattr(cfg, name) for name in static_fields(type(cfg)))


def shape_key(cfg, num_pairs: int) -> tuple:
    """What a group's memory estimate depends on: its static fields but the config class's ``BRANCH_FIELDS``
    (static switches that choose a branch of the program, not the shape of its arrays), and its pair count."""
    branch = getattr(type(cfg), "BRANCH_FIELDS", ())
    return (num_pairs, *(getattr(cfg, name) for name in static_fields(type(cfg)) if name not in branch))


def group_pairs(spec: SweepSpec) -> list[Group]:
    """Group the spec's (setting, seed) pairs by static fields, in canonical order of first appearance; one group
    per pretraining seed of each (``spec.pretrain_seeds``, the inner loop)."""
    by_key: dict[tuple, list] = {}
    for index, setting in enumerate(spec.settings):
        by_key.setdefault(static_key(setting.cfg), []).append(index)
    groups = []
    for indices in by_key.values():
        cfg = spec.settings[indices[0]].cfg
        static = {
            name: column_value(getattr(cfg, name))
            for name in static_fields(type(cfg))
            if getattr(cfg, name) != getattr(spec.base, name)
        }
        pairs = tuple((i, seed) for i in indices for seed in spec.seeds)
        first = len(groups)
        for pretrain_seed in spec.pretrain_seeds:
            g = len(groups)
            groups.append(Group(g, cfg, static, pairs, pretrain_seed, g if spec.pretrain_per_setting else first))
    return groups


def round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def balanced_chunk_size(num_pairs: int, fit: int, multiple: int = 1) -> int:
    """The chunk size for ``num_pairs`` pairs when at most ``fit`` fit in memory.

    Uses as few chunks as fit allows, then spreads the pairs evenly over them so
    that the padding of the last chunk is small: 100 pairs with fit 64 give two
    chunks of 50, not 64 + 36 (28 padded). The size is a multiple of ``multiple``
    (the device count) and at most ``max(fit, multiple)``.
    """
    fit = max(multiple, fit // multiple * multiple)
    num_chunks = math.ceil(num_pairs / fit)
    return round_up(math.ceil(num_pairs / num_chunks), multiple)


def make_chunks(groups: list[Group], chunk_sizes: list[int]) -> list[Chunk]:
    """Cut each group into chunks of its chunk size (the last may be short); ids are stable."""
    chunks = []
    for group, size in zip(groups, chunk_sizes, strict=True):
        for c, start in enumerate(range(0, len(group.pairs), size)):
            chunks.append(Chunk(f"g{group.index:03d}-c{c:05d}", group.index, group.pairs[start : start + size]))
    return chunks


def parse_part(text: str | None) -> tuple[int, int] | None:
    """``"i/N"`` -> ``(i, N)`` with ``0 <= i < N`` (SLURM: ``$SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT``)."""
    if text is None:
        return None
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", str(text))
    if not match or not 0 <= int(match[1]) < int(match[2]):
        raise SpecError(f"--part takes i/N with 0 <= i < N (e.g. 0/4 ... 3/4), got {text!r}.")
    return int(match[1]), int(match[2])


def part_slice(num_chunks: int, part: tuple[int, int] | None) -> range:
    """The chunk indices of part ``(i, N)``: contiguous, sizes differing by at most one, covering all."""
    if part is None:
        return range(num_chunks)
    i, n = part
    return range(i * num_chunks // n, (i + 1) * num_chunks // n)


_UNITS = {"": 1, "b": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
_UNITS.update({f"{u}ib": v for u, v in list(_UNITS.items()) if u not in ("", "b")})
_UNITS.update({"kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12})


def parse_bytes(text: str | None) -> int | None:
    """``"8GiB"``, ``"8G"`` (binary), ``"8GB"`` (decimal), ``"2e9"`` -> bytes."""
    if text is None:
        return None
    match = re.fullmatch(r"\s*([0-9.eE+]+)\s*([a-zA-Z]*)\s*", str(text))
    try:
        value = float(match[1]) * _UNITS[match[2].lower()] if match else -1
    except (KeyError, ValueError):
        value = -1
    if not value > 0:
        raise SpecError(f"--memory-budget takes a size like 8GiB, 500MB or 2e9 (bytes), got {text!r}.")
    return int(value)


def format_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"
