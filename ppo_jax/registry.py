"""``Registry``: one table per switch family, from which its allowed values, its checks and its docs are derived.

A switch family is a static config field whose value names one variant of an idea
(an advantage estimator, a policy loss, a KL estimator, an environment suite):

    ESTIMATORS = Registry("advantage", "advantage estimator")
    ESTIMATORS.register("grpo", Estimator(fn=..., reads=("adv_eps",), doc=..., reference=...))

The table lives beside the formulas it names; everything else asks it:

* ``names()``: the allowed values (the CLI's choices, a sweep's axis values);
* ``check(value)``: a ``ConfigError`` naming the field, close matches and every known value;
* ``inert(value)``: the config fields the other entries read and this one does not
  (a config's ``inert_fields``: a sweep refuses them as axes, the CLI refuses them as flags);
* ``markdown()``: the docs table (``docs/switches.md`` is generated from it).

An entry is any object; where it has ``reads`` (config field names), ``doc`` and
``reference`` attributes, ``inert`` and ``markdown`` use them. Code outside the
package adds a variant with ``register`` (no file of ``ppo_jax/`` edited).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Generic, Literal, TypeVar

from ppo_jax.errors import ConfigError, close_matches

Entry = TypeVar("Entry")


class Registry(Generic[Entry]):
    """The variants of one switch family, by name, in registration order."""

    def __init__(self, field: str, family: str):
        self.field = field
        """The config field that names a variant ("advantage")."""
        self.family = family
        """The family in words ("advantage estimator"), for messages and docs."""
        self._entries: dict[str, Entry] = {}

    def register(self, name: str, entry: Entry, *, replace: bool = False) -> Entry:
        """Add variant ``name``; ValueError if the name is taken (``replace=True`` overrides an entry)."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"a {self.family} needs a non-empty string name, got {name!r}")
        if name in self._entries and not replace:
            raise ValueError(f"{self.family} {name!r} is registered already; pass replace=True to override it")
        self._entries[name] = entry
        return entry

    def unregister(self, name: str) -> Entry:
        """Remove variant ``name`` (tests that register a toy variant restore the table with it)."""
        return self._entries.pop(name)

    def names(self) -> tuple[str, ...]:
        return tuple(self._entries)

    def items(self) -> Iterator[tuple[str, Entry]]:
        return iter(self._entries.items())

    def __iter__(self) -> Iterator[str]:
        """The names, in registration order (a table reads like the tuple of its names)."""
        return iter(tuple(self._entries))

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, name) -> bool:
        return isinstance(name, str) and name in self._entries

    def get(self, name, default=None):
        """The entry ``name``, or ``default`` when there is none (no error: for code that runs before validation)."""
        return self._entries.get(name, default) if isinstance(name, str) else default

    def __getitem__(self, name: str) -> Entry:
        """The entry ``name``; a ConfigError naming the known ones otherwise (the engines' look-up)."""
        if name not in self:
            raise ConfigError(f"unknown {self.family} {name!r}; expected one of {self.names()}")
        return self._entries[name]

    def check(self, value) -> None:
        """ConfigError unless ``value`` names a registered variant (a config's validation: names the field)."""
        if value not in self:
            raise ConfigError(
                f"unknown {self.field} {value!r}.{close_matches(str(value), self._entries)} "
                f"Choose one of: {', '.join(self._entries)}."
            )

    def literal(self):
        """``Literal[...]`` of the names registered now (a config field's annotation, the CLI's choices)."""
        return Literal[self.names()]

    def where(self, predicate) -> tuple[str, ...]:
        """The names whose entry satisfies ``predicate(entry)``."""
        return tuple(name for name, entry in self._entries.items() if predicate(entry))

    def read_by_any(self) -> tuple[str, ...]:
        """Every config field some variant reads, in first-seen order."""
        fields: dict[str, None] = {}
        for entry in self._entries.values():
            fields.update(dict.fromkeys(getattr(entry, "reads", ())))
        return tuple(fields)

    def inert(self, value: str) -> dict[str, str]:
        """``{field: why}``: the fields other variants read that variant ``value`` ignores, with the ones that read it."""
        reads = set(getattr(self._entries.get(value), "reads", ()))
        inert = {}
        for name in self.read_by_any():
            if name not in reads:
                readers = self.where(lambda entry, name=name: name in getattr(entry, "reads", ()))
                listed = " or ".join([", ".join(readers[:-1]), readers[-1]] if len(readers) > 1 else readers)
                inert[name] = (
                    f"the {self.family} {value} does not read it ({self.field}: {value}; "
                    f"{listed} {'does' if len(readers) == 1 else 'do'})"
                )
        return inert

    def markdown(self) -> str:
        """The family as a Markdown table: name, what it computes, what it reads, reference."""
        rows = ["| name | what it computes | reads | reference |", "|---|---|---|---|"]
        for name, entry in self._entries.items():
            reads = ", ".join(f"`{f}`" for f in getattr(entry, "reads", ())) or "-"
            cells = [f"`{name}`", getattr(entry, "doc", ""), reads, getattr(entry, "reference", "")]
            rows.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
        return "\n".join(rows)
