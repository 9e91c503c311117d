"""A griffe extension for the API reference: doctest runs in docstrings become ```pycon blocks.

promptkit's docstrings show their examples as bare doctest runs (``>>> call()`` and the output under
it), which Markdown would render as a paragraph (and read ``['a']`` as a link). Each run of lines from a
``>>>`` line to the next blank line is fenced; runs already inside an indented literal block stay as
they are. Loaded by mkdocs.yml (mkdocstrings ``extensions``).
"""

from __future__ import annotations

import re
from typing import Any

import griffe

#: Sphinx cross-reference roles (``:func:`~promptkit.x.f```) become code spans with the short name.
_ROLE = re.compile(r":(?:class|func|meth|data|attr|mod|exc|obj):`~?([^`]+)`")


def markdown_of(text: str) -> str:
    """A docstring's reST-isms as Markdown: roles become code spans (the last dotted part), a paragraph
    ending in ``::`` ends in ``:``, and doctest runs are fenced (:func:`fence_doctests`).

    >>> markdown_of("See :func:`~promptkit.analysis.engine.analyze` and :class:`Usage`. Example::")
    'See `analyze` and `Usage`. Example:'
    """
    text = _ROLE.sub(lambda m: f"`{m.group(1).rsplit('.', 1)[-1]}`", text)
    text = re.sub(r"(\S)::$", r"\1:", text, flags=re.M)
    return fence_doctests(text)


def fence_doctests(text: str) -> str:
    """``text`` with every unindented doctest run wrapped in a pycon fence.

    >>> fence_doctests("Intro.\\n\\n>>> 1 + 1\\n2\\n\\nMore.").splitlines()
    ['Intro.', '', '```pycon', '>>> 1 + 1', '2', '```', '', 'More.']
    """
    out: list[str] = []
    inside = False
    for line in text.splitlines():
        if not inside and line.startswith(">>>"):
            out.append("```pycon")
            inside = True
        elif inside and not line.strip():
            out.append("```")
            inside = False
        out.append(line)
    if inside:
        out.append("```")
    return "\n".join(out)


class DoctestFences(griffe.Extension):
    """Fence the doctest runs of every docstring griffe loads."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = markdown_of(obj.docstring.value)
