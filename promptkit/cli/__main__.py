"""``python -m promptkit.cli``: the same command line as the ``promptkit`` script."""

from __future__ import annotations

import sys

from promptkit.cli import main

if __name__ == "__main__":  # pragma: no branch
    sys.exit(main())
