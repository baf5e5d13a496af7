"""Build the default FOLDOC benchmark: a thin wrapper over ``python -m bench.data.foldoc``.

Usage: python scripts/build_foldoc.py build --out .data/foldoc [--deb PATH] [--force]
"""

from __future__ import annotations

import sys
from pathlib import Path

# run from a checkout without installing: make the repository root importable
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.data.foldoc import main

if __name__ == "__main__":
    sys.exit(main())
