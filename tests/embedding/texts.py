"""Texts the corpus-pass tests encode: the packaged static encoder and passages of varied
length (length-sorted batches pad differently)."""

from __future__ import annotations

import numpy as np

STATIC = {"model": "packaged:paraphrase-MiniLM-L3-v2",
          "tokenizer": "packaged:all-MiniLM-L6-v2"}
WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota",
         "kappa", "lambda", "mu", "nu", "xi", "omicron", "pi", "rho", "sigma", "tau"]


def corpus(n: int, *, seed: int = 7) -> list[str]:
    """Texts of 1 to 60 words."""
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=int(rng.integers(1, 61)))) for _ in range(n)]
