"""``python -m bench.compare``: the command line of :mod:`bench.compare`."""

from bench.compare import main

if __name__ == "__main__":
    raise SystemExit(main())
