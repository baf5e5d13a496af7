"""`python -m bench +experiment=NAME [overrides]` — see README.md."""

from bench.app import main

if __name__ == "__main__":
    main()
