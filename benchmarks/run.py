"""Entry point: ``python benchmarks/run.py [--quick]`` (see ``benchmarks/cli.py``)."""

import sys
from pathlib import Path

if __name__ == "__main__":
    # The repository root replaces this script's folder on the path: the package is imported
    # as ``benchmarks``, and its module names cannot shadow the standard library's.
    sys.path[0] = str(Path(__file__).resolve().parent.parent)
    from benchmarks.cli import main

    sys.exit(main())
