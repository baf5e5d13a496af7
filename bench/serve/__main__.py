"""`python -m bench.serve +experiment=NAME config=<config_id> [overrides]` — docs/serve.md."""

from bench.serve.cli import main

if __name__ == "__main__":
    main()
