"""``python -m bench.data.foldoc build --out DIR [--deb PATH] ...`` -- see ``cli.main``."""

import sys

from bench.data.foldoc.cli import main

if __name__ == "__main__":
    sys.exit(main())
