"""Reading sweep specs: YAML with YAML 1.2 floats, duplicate keys refused, and errors that name the line.

PyYAML implements YAML 1.1, where ``1e-3`` is the string "1e-3"; here it is the
float 0.001, as in YAML 1.2 (and JSON). A key given twice in one mapping is an
error instead of the last one silently winning. Parsing stays safe
(``yaml.SafeLoader``: plain data only).
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from ppo_jax.errors import SpecError


class _Loader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2 floats (1e-3, 5e5) and an error on duplicate keys."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} appears twice in this mapping", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


_FLOAT = re.compile(
    r"^[-+]?(\.[0-9]+|[0-9][0-9_]*(\.[0-9_]*)?)([eE][-+]?[0-9]+)?$|^[-+]?\.(inf|Inf|INF)$|^\.(nan|NaN|NAN)$"
)
_Loader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT, list("-+0123456789."))


def _line_map(text: str) -> dict[tuple, int]:
    """1-based line of every mapping value / sequence item, by its key path."""
    lines: dict[tuple, int] = {}

    def walk(node, path):
        lines[path] = node.start_mark.line + 1
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                walk(value, path + (key.value,))
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                walk(item, path + (i,))

    root = yaml.compose(text, Loader=_Loader)
    if root is not None:
        walk(root, ())
    return lines


def parse_yaml(text: str, filename: str = "<spec>") -> tuple[Any, dict[tuple, int]]:
    """(data, line map) of a YAML document; malformed YAML raises SpecError with the line."""
    try:
        return yaml.load(text, Loader=_Loader), _line_map(text)
    except yaml.MarkedYAMLError as error:
        mark, context = error.problem_mark or error.context_mark, ""
        where = f"{filename}, line {mark.line + 1}, column {mark.column + 1}" if mark else filename
        if error.context and error.context_mark:
            context = f" ({error.context} started on line {error.context_mark.line + 1})"
        raise SpecError(f"{where}: malformed YAML: {error.problem or error.context}{context}") from None
    except yaml.YAMLError as error:
        raise SpecError(f"{filename}: malformed YAML: {error}") from None


class Locator:
    """Where a spec came from, for messages like ``file, line N (grid.clip_eps[1]): ...``."""

    def __init__(self, filename: str, lines: dict[tuple, int]):
        self.filename, self.lines = filename, lines

    def error(self, path: tuple, message: str) -> SpecError:
        dotted = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")
        line = self.lines.get(path)
        where = f"{self.filename}, line {line}" if line else self.filename
        return SpecError(f"{where} ({dotted}): {message}" if dotted else f"{where}: {message}")
