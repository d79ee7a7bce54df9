"""Reading sweep specs: YAML with YAML 1.2 floats, duplicate keys refused, and errors that name the line.

PyYAML implements YAML 1.1, where ``1e-3`` is the string "1e-3"; here it is the
float 0.001, as in YAML 1.2 (and JSON). A key given twice in one mapping is an
error instead of the last one silently winning. Parsing stays safe
(``yaml.SafeLoader``: plain data only).
"""

from __future__ import annotations

import re
import reprlib
from typing import Any

import yaml

from ppo_jax.errors import SpecError


class _Loader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2 floats (1e-3, 5e5) and an error on duplicate keys."""

    def construct_object(self, node, deep=False):
        try:
            return super().construct_object(node, deep=deep)
        except (yaml.YAMLError, RecursionError):
            raise
        except Exception as error:  # noqa: BLE001 -- a constructor's own failure (!!timestamp 2001-13-45): with its line
            tag = node.tag.rsplit(":", 1)[-1]
            raise yaml.constructor.ConstructorError(
                None, None, f"cannot read {str(node.value)[:40]!r} as {tag} ({error})", node.start_mark
            ) from None

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # <<: *base, merged (and overridden) by the base class
                continue
            key = self.construct_object(key_node, deep=deep)
            try:
                hash(key)
            except TypeError:  # a list or mapping as a key (``? [1, 2]``): the base class's check, before ours uses it
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping", node.start_mark, "found unhashable key", key_node.start_mark
                ) from None
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


def _line_map(root, loader: _Loader) -> dict[tuple, int]:
    """1-based line of every mapping value / sequence item, by its key path (keys as the data holds them: ``1``, not ``"1"``).

    Each node is walked once: the contents of an alias (``*a``) are mapped where its anchor (``&a``) is, which
    also keeps self-referencing and exponentially aliased documents finite (``Locator.error`` falls back to
    the nearest mapped ancestor).
    """
    lines: dict[tuple, int] = {}
    walked: set[int] = set()

    def key_of(node):
        try:
            key = loader.construct_object(node, deep=True)
            hash(key)
            return key
        except Exception:  # a merge key (<<) or an unhashable one: the raw text
            return getattr(node, "value", None) if isinstance(node, yaml.ScalarNode) else id(node)

    def walk(node, path):
        lines.setdefault(path, node.start_mark.line + 1)
        if id(node) in walked:
            return
        walked.add(id(node))
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                walk(value, path + (key_of(key),))
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                walk(item, path + (i,))

    if root is not None:
        walk(root, ())
    return lines


def _character(character) -> str:
    return f"#x{character:04x}" if isinstance(character, int) else repr(character)


def _one_line(text) -> str:
    return " ".join(str(text).split())


def parse_yaml(text: str, filename: str = "<spec>") -> tuple[Any, dict[tuple, int]]:
    """(data, line map) of a YAML document; malformed YAML raises SpecError with the line, in one line."""
    loader = None
    try:
        loader = _Loader(text)  # its reader refuses characters YAML does not allow, right away
        root = loader.get_single_node()
        data = loader.construct_document(root) if root is not None else None
        return data, _line_map(root, loader)
    except yaml.MarkedYAMLError as error:
        mark, context = error.problem_mark or error.context_mark, ""
        where = f"{filename}, line {mark.line + 1}, column {mark.column + 1}" if mark else filename
        if error.context and error.context_mark:
            context = f" ({_one_line(error.context)} started on line {error.context_mark.line + 1})"
        raise SpecError(f"{where}: malformed YAML: {_one_line(error.problem or error.context)}{context}") from None
    except yaml.reader.ReaderError as error:  # a character YAML does not allow (a NUL byte, ...)
        where = filename
        if isinstance(error.position, int) and isinstance(text, str):
            where = f"{filename}, line {text[: error.position].count(chr(10)) + 1}"
        raise SpecError(
            f"{where}: malformed YAML: character {_character(error.character)} is not allowed ({_one_line(error.reason)})"
        ) from None
    except yaml.YAMLError as error:
        raise SpecError(f"{filename}: malformed YAML: {_one_line(error)}") from None
    except RecursionError:
        raise SpecError(f"{filename}: malformed YAML: nested too deeply to read.") from None
    except Exception as error:  # noqa: BLE001 -- PyYAML's constructors fail in their own ways: !!timestamp 2001-13-45
        raise SpecError(f"{filename}: malformed YAML: a value cannot be read ({_one_line(error)}).") from None
    finally:
        if loader is not None:
            loader.dispose()


_KEY = re.compile(r"[\w.+/-]{1,60}")
_KEY_REPR = reprlib.Repr()
_KEY_REPR.maxstring = _KEY_REPR.maxother = 40


def key_text(key) -> str:
    """A key in a dotted path: as written when it is a plain word (clip_eps, brax/ant), else its short repr ('a\\nb')."""
    return key if isinstance(key, str) and _KEY.fullmatch(key) else _KEY_REPR.repr(key)


class Locator:
    """Where a spec came from, for messages like ``file, line N (grid.clip_eps[1]): ...``."""

    def __init__(self, filename: str, lines: dict[tuple, int]):
        self.filename, self.lines = filename, lines

    def error(self, path: tuple, message: str) -> SpecError:
        dotted = "".join(
            f"[{p}]" if isinstance(p, int) and not isinstance(p, bool) else f".{key_text(p)}" for p in path
        ).lstrip(".")
        line = next((self.lines[path[:n]] for n in range(len(path), -1, -1) if path[:n] in self.lines), None)
        where = f"{self.filename}, line {line}" if line else self.filename
        return SpecError(f"{where} ({dotted}): {message}" if dotted else f"{where}: {message}")
