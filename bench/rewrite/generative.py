"""Rewriters that ask a generator: HyDE and multi-query, through any generation backend.

- ``HyDERewriter`` (Gao et al. 2022, "Precise Zero-Shot Dense Retrieval without Relevance
  Labels"): the generator writes ``n`` hypothetical passages answering the query; the query
  vector becomes the mean of the query's vector and the passages' vectors (the paper's
  ``1/(N+1) [f(q) + sum f(d_i)]``), renormalised, searched on the dense index.
- ``MultiQueryRewriter``: the generator writes ``n`` alternative phrasings of the query;
  the query and each phrasing are searched on the dense index and the rankings are merged
  before the depth cut ``k``: ``rrf`` (sum of 1 / (rrf_k + rank)) or ``union`` (each document
  at its best score).

Sample ``i`` of a query is its own request with seed ``seed + i`` at ``temperature`` (with
``n > 1`` a temperature of 0 would give ``n`` identical texts, so it is refused). The prompt
is a template with a ``{query}`` slot (config: ``prompt``, and an optional ``system``
message); a template without the slot, or with another slot, is a config error naming the
key before any work. The texts are an artifact of the plan (``GenerateRewritesOp``), keyed
by the generator's identity, the template, n, temperature, seed and max_tokens and the
queries: a sweep that changes anything downstream never regenerates them.
"""

from __future__ import annotations

import re
import string

from bench.config.build import OptionError
from bench.generation.base import ChatMessage, GenerationRequest, Generator, SamplingParams

#: what a template must hold (and the only slot it may hold)
QUERY_SLOT = "query"
_NUMBERING = re.compile(r"^\s*(?:[-*•]|\(?\d+[.):])\s*")


def check_template(option: str, template: str) -> str:
    """``template`` if its only format slot is ``{query}`` (at least once), else an
    OptionError naming ``option``."""
    try:
        slots = [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]
    except ValueError as exc:
        raise OptionError(option, f"not a valid template ({exc})") from None
    if QUERY_SLOT not in slots:
        raise OptionError(option, "the prompt template has no {query} slot")
    other = sorted({s for s in slots if s != QUERY_SLOT})
    if other:
        raise OptionError(option, f"unknown slot(s) {other}; the template takes only {{query}}")
    return template


class _Generative:
    """What HyDE and multi-query share: the generator, the prompt and the sampling."""

    name = "generative"
    #: the lane it searches
    lane = "dense"

    def __init__(self, *, generator: Generator, prompt: str, system: str | None, n: int,
                 temperature: float, max_tokens: int, seed: int) -> None:
        if n < 1:
            raise OptionError("n", f"must be >= 1, got {n}")
        if temperature < 0:
            raise OptionError("temperature", f"must be >= 0, got {temperature}")
        if n > 1 and temperature == 0:
            raise OptionError("temperature", f"n={n} samples at temperature 0 are one text "
                                             "n times (greedy decoding); set temperature > 0")
        if max_tokens < 1:
            raise OptionError("max_tokens", f"must be >= 1, got {max_tokens}")
        self.generator = generator
        self.prompt = check_template("prompt", prompt)
        self.system = system
        self.n = n
        self.temperature = float(temperature)
        self.max_tokens = max_tokens
        self.seed = seed

    def generation_params(self) -> dict[str, object]:
        """What changes the texts (the generated texts' artifact key)."""
        return {"generator": self.generator.cache_params(), "prompt": self.prompt,
                "system": self.system, "n": self.n, "temperature": self.temperature,
                "max_tokens": self.max_tokens, "seed": self.seed}

    def requests(self, query_id: str, text: str) -> list[GenerationRequest]:
        """The ``n`` requests of one query (sample i: seed + i)."""
        msgs = ((ChatMessage("system", self.system),) if self.system else ()) + (
            ChatMessage("user", self.prompt.format(query=text)),)
        return [GenerationRequest(f"rewrite:{self.name}:{query_id}:{i}", msgs,
                                  SamplingParams(max_tokens=self.max_tokens,
                                                 temperature=self.temperature,
                                                 seed=self.seed + i))
                for i in range(self.n)]

    def parse(self, text: str) -> str:
        """The search text a generation gives ("" when it gives none)."""
        return text.strip()


class HyDERewriter(_Generative):
    name = "hyde"

    def __init__(self, *, generator: Generator,
                 prompt: str = "Write a short passage that answers the question.\n"
                               "Question: {query}\nPassage:",
                 system: str | None = None, n: int = 1, temperature: float = 0.0,
                 max_tokens: int = 96, seed: int = 0) -> None:
        super().__init__(generator=generator, prompt=prompt, system=system, n=n,
                         temperature=temperature, max_tokens=max_tokens, seed=seed)

    def cache_params(self) -> dict[str, object]:
        return {"kind": "hyde", **self.generation_params()}


class MultiQueryRewriter(_Generative):
    name = "multi_query"

    def __init__(self, *, generator: Generator,
                 prompt: str = "Rewrite this search query in other words. Answer with the "
                               "rewritten query only.\nQuery: {query}\nRewritten query:",
                 system: str | None = None, n: int = 2, temperature: float = 0.7,
                 max_tokens: int = 32, seed: int = 0, fuse: str = "rrf", rrf_k: int = 60,
                 include_original: bool = True) -> None:
        super().__init__(generator=generator, prompt=prompt, system=system, n=n,
                         temperature=temperature, max_tokens=max_tokens, seed=seed)
        if fuse not in ("rrf", "union"):
            raise OptionError("fuse", f"must be rrf or union, got {fuse!r}")
        if rrf_k < 1:
            raise OptionError("rrf_k", f"must be >= 1, got {rrf_k}")
        self.fuse = fuse
        self.rrf_k = rrf_k
        self.include_original = include_original

    def cache_params(self) -> dict[str, object]:
        return {"kind": "multi_query", **self.generation_params(), "fuse": self.fuse,
                "rrf_k": self.rrf_k, "include_original": self.include_original}

    def parse(self, text: str) -> str:
        # small models add numbering, quotes or several lines: the first phrasing is kept
        for line in text.strip().splitlines():
            line = _NUMBERING.sub("", line).strip().strip('"').strip()
            if line:
                return line
        return ""

