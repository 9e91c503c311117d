"""A griffe extension for the API reference: doctest runs in docstrings become ```pycon blocks.

promptkit's docstrings show their examples as bare doctest runs (``>>> call()`` and the output under
it), which Markdown would render as a paragraph (and read ``['a']`` as a link). Each run of lines from a
``>>>`` line to the next blank line is fenced; runs already inside an indented literal block stay as
they are. Loaded by mkdocs.yml (mkdocstrings ``extensions``).
"""

from __future__ import annotations

from typing import Any

import griffe


def fence_doctests(text: str) -> str:
    """``text`` with every unindented doctest run wrapped in a pycon fence.

    >>> print(fence_doctests("Intro.\\n\\n>>> 1 + 1\\n2\\n\\nMore."))
    Intro.
    <BLANKLINE>
    ```pycon
    >>> 1 + 1
    2
    ```
    <BLANKLINE>
    More.
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
            obj.docstring.value = fence_doctests(obj.docstring.value)
