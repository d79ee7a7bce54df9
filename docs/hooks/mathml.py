"""mkdocs hook: the pages' TeX (pymdownx.arithmatex, generic mode) rendered to MathML when the site is built.

Browsers render MathML natively, so formulas need no script and no network (latex2mathml does the conversion).
"""

from __future__ import annotations

import html
import re

from latex2mathml.converter import convert

_MATH = re.compile(
    r'<(?P<tag>span|div) class="arithmatex">\s*(?:\\\((?P<inline>.*?)\\\)|\\\[(?P<block>.*?)\\\])\s*</(?P=tag)>',
    re.DOTALL,
)


def _mathml(match: re.Match) -> str:
    tex = match["inline"] if match["inline"] is not None else match["block"]
    display = "inline" if match["inline"] is not None else "block"
    return convert(html.unescape(tex).strip(), display=display)


def on_page_content(content: str, **kwargs) -> str:
    return _MATH.sub(_mathml, content)
