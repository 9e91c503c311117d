"""mkdocs hook: the marker ``<!-- cli-reference -->`` on a page becomes the ``--help`` of every
``promptkit`` command, taken from the argument parser at build time, so the reference cannot drift
from the code and a new subcommand appears without editing the page. Loaded by mkdocs.yml (``hooks``).
"""

from __future__ import annotations

import argparse
import os
from typing import Any

MARKER = "<!-- cli-reference -->"


def cli_reference() -> str:
    """Markdown: the top-level help, then one section per subcommand with its help text."""
    from promptkit.cli import build_parser

    os.environ["COLUMNS"] = "100"  # argparse wraps help at the terminal width
    parser = build_parser()
    parts = ["```text", parser.format_help().rstrip(), "```"]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                parts += ["", f"### promptkit {name}", "", "```text", sub.format_help().rstrip(), "```"]
    return "\n".join(parts)


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    if MARKER in markdown:
        return markdown.replace(MARKER, cli_reference())
    return markdown
