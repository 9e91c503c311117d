"""Write the tutorial notebooks from their paired Python sources, and execute them.

Each notebook is kept as a jupytext "percent" script, ``notebooks/NN-name.py``, the file to review and
edit; the ``.ipynb`` next to it is generated from it, executed, with its outputs stored. Run from
anywhere::

    python notebooks/_build.py               # write all notebooks and execute them (outputs stored)
    python notebooks/_build.py 02            # only the notebooks whose name contains "02"
    python notebooks/_build.py --no-execute  # write them without outputs

Execution uses nbclient with the ``python3`` kernel and ``notebooks/`` as the working directory, the
way ``tests/test_notebooks.py`` runs them. Cell ids are derived from the notebook name and the cell
position, and no timing metadata is recorded, so a rebuild changes only what really changed.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import jupytext
import nbformat
from nbclient import NotebookClient

HERE = Path(__file__).resolve().parent
KERNEL = "python3"
CELL_TIMEOUT = 600  # seconds per cell; each notebook runs in seconds


def sources() -> dict[str, Path]:
    """The paired sources, by notebook name (``01-build-per-turn-prompts`` …)."""
    return {p.stem: p for p in sorted(HERE.glob("[0-9][0-9]-*.py"))}


def build(name: str, source: Path) -> nbformat.NotebookNode:
    """The notebook (nbformat 4) of a paired source, with deterministic cell ids and the python3 kernel."""
    nb = jupytext.read(source, fmt="py:percent")
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": KERNEL}
    nb.metadata["language_info"] = {"name": "python"}
    nb.metadata["jupytext"] = {"formats": "ipynb,py:percent"}
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"{name[:2]}-{i:02d}"
        cell.metadata = {}
    nbformat.validate(nb)
    return nb


def execute(
    nb: nbformat.NotebookNode, *, cwd: Path = HERE, timeout: int = CELL_TIMEOUT
) -> nbformat.NotebookNode:
    """Execute ``nb`` top to bottom in a fresh ``python3`` kernel with ``cwd`` as working directory;
    raises ``nbclient.exceptions.CellExecutionError`` on the first failing cell."""
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name=KERNEL,
        resources={"metadata": {"path": str(cwd)}},
        record_timing=False,
    )
    return client.execute()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("only", nargs="*", help="build only notebooks whose name contains one of these")
    parser.add_argument("--no-execute", action="store_true", help="write the notebooks without running them")
    args = parser.parse_args(argv)
    for name, source in sources().items():
        if args.only and not any(part in name for part in args.only):
            continue
        nb = build(name, source)
        started = time.perf_counter()
        if not args.no_execute:
            nb = execute(nb)
        path = HERE / f"{name}.ipynb"
        nbformat.write(nb, path)
        took = f" (executed in {time.perf_counter() - started:.1f} s)" if not args.no_execute else ""
        print(
            f"wrote {path.relative_to(HERE.parent)}: {len(nb.cells)} cells, {path.stat().st_size // 1024} KiB{took}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
