"""The executable fences of a documentation page, and how the test suite runs them.

A page's ```bash and ```python fences run in order in one working directory;
```text, ```yaml and other fences are shown, not run. HTML comments on the lines
right before a fence steer it (they are invisible on the site):

    <!-- ci: skip REASON -->            not run (a reason is required)
    <!-- ci: replace "OLD" "NEW" -->    substituted before running (repeatable; OLD must occur; \\n is a newline)
    <!-- ci: write PATH -->             the fence's text is written to PATH instead of run
"""

from __future__ import annotations

import dataclasses
import re
import shlex

RUN_LANGUAGES = ("bash", "python")
_FENCE = re.compile(r"^(?P<indent> *)(?P<ticks>`{3,})(?P<lang>[\w+-]*)[^\n]*$")
_DIRECTIVE = re.compile(r"^\s*<!--\s*ci:\s*(?P<verb>\w+)\s*(?P<args>.*?)\s*-->\s*$")


class FenceError(ValueError):
    """A page's fence or directive is malformed (says the page and line)."""


@dataclasses.dataclass(frozen=True)
class Fence:
    """One fenced block: its language, text, 1-based line and its directives."""

    lang: str
    text: str
    line: int
    skip: str | None = None
    replace: tuple[tuple[str, str], ...] = ()
    write: str | None = None

    @property
    def runs(self) -> bool:
        return self.skip is None and (self.write is not None or self.lang in RUN_LANGUAGES)

    def command_text(self) -> str:
        """The text to run or write, after the ``replace`` directives."""
        text = self.text
        for old, new in self.replace:
            if old not in text:
                raise FenceError(f"line {self.line}: ci: replace {old!r} does not occur in the fence")
            text = text.replace(old, new)
        return text


def parse(markdown: str, name: str = "page") -> list[Fence]:
    """Every fenced block of ``markdown`` with the directives just above it."""
    lines = markdown.splitlines()
    fences, pending, i = [], [], 0
    while i < len(lines):
        line = lines[i]
        directive = _DIRECTIVE.match(line)
        opening = _FENCE.match(line)
        if directive:
            pending.append((i + 1, directive["verb"], directive["args"]))
        elif opening:
            close = re.compile(rf"^ *{opening['ticks']}`*\s*$")
            end = next((j for j in range(i + 1, len(lines)) if close.match(lines[j])), None)
            if end is None:
                raise FenceError(f"{name}:{i + 1}: fence never closed")
            indent = len(opening["indent"])
            body = "\n".join(text[indent:] if text[:indent].isspace() else text for text in lines[i + 1 : end])
            fences.append(_fence(opening["lang"].lower(), body + "\n", i + 1, pending, name))
            pending, i = [], end
        elif line.strip():
            if pending:
                raise FenceError(f"{name}:{pending[0][0]}: a ci: directive must sit right before a fence")
        i += 1
    if pending:
        raise FenceError(f"{name}:{pending[0][0]}: a ci: directive after the last fence")
    return fences


def _fence(lang: str, text: str, line: int, directives, name: str) -> Fence:
    skip, replace, write = None, [], None
    for at, verb, args in directives:
        if verb == "skip":
            if not args:
                raise FenceError(f"{name}:{at}: ci: skip needs a reason")
            skip = args
        elif verb == "replace":
            parts = shlex.split(args)
            if len(parts) != 2:
                raise FenceError(f'{name}:{at}: ci: replace takes two quoted strings: "OLD" "NEW"')
            replace.append((parts[0].replace("\\n", "\n"), parts[1].replace("\\n", "\n")))
        elif verb == "write":
            if not args or args.startswith("/") or ".." in args.split("/"):
                raise FenceError(f"{name}:{at}: ci: write needs a relative path inside the page's directory")
            write = args
        else:
            raise FenceError(f"{name}:{at}: unknown directive ci: {verb} (skip, replace or write)")
    return Fence(lang, text, line, skip, tuple(replace), write)
