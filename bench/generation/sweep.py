"""Several generators in one run, answering the same contexts (``generator=sweep``).

``conf/generator/sweep.yaml`` holds ``members``: name -> ``{generator: <a generator block>,
family: <model family or null>, sampling: <overrides of generation.max_tokens / temperature /
top_p / seed, optional>}``, e.g. (docs/generation.md "Generators compared")::

    python -m bench +experiment=rag_e2e generator=sweep \\
        +generator@generator.members.smollm2.generator=transformers_cpu \\
        +generator@generator.members.extractive.generator=extractive

The plan computes retrieval, reranking and each context ONCE and generates per member
(``bench.generation.stage.generation_nodes``): the members see byte-identical prompts, fitted
to the FIRST member's tokenizer (the context node is the one a run of the first member alone
would make, so it is shared with that run's cache). The first member is also the run's
generator where one model is needed (the judge's default model, ``generator_name``).

A member's ``family`` declares its model family for self-preference (``bench.judge.pairing``):
a judge that shares a family with one member may favour that member's answers. Left null,
the family is the documented heuristic of ``bench.judge.pairing.family`` (the model's short
name up to its first ``-``: ``smollm2-135m-instruct`` -> ``smollm2``); declare it whenever
the name does not say it (a fine-tune, a served alias).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from bench.config.build import OptionError, build
from bench.generation.base import Generator, generator_name

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_KEYS = ("generator", "family", "sampling")
#: what a member's ``sampling`` may override of ``generation.*``
SAMPLING_KEYS = ("max_tokens", "temperature", "top_p", "seed")


@dataclass(frozen=True)
class SweepMember:
    """One generator of a sweep: its name (in config labels: ``...>gen(NAME)``), the
    generator, its model family (declared or by the heuristic; ``declared`` says which) and
    its own sampling overrides (the same model with another decoding is another member)."""

    name: str
    generator: Generator
    family: str
    declared: bool
    #: overrides of the run's sampling (``generation.*``) for this member only
    sampling: Mapping[str, Any] = field(default_factory=dict)


class GeneratorSweep:
    """``members``: name -> ``{generator: block, family: str | null, sampling: {...}}``, in
    report order (the
    first is the baseline of the pairwise comparisons and fits the shared context)."""

    def __init__(self, *, members: dict[str, Any]) -> None:
        from bench.judge.pairing import family

        if not members:
            raise OptionError("members", "a generator sweep needs generators: "
                              "+generator@generator.members.NAME.generator=OPTION")
        out: list[SweepMember] = []
        seen: dict[str, str] = {}
        for name, block in members.items():
            key = f"members.{name}"
            if not _NAME.match(str(name)):
                raise OptionError(key, "a member name is letters, digits, '_', '.', '-'")
            if not isinstance(block, Mapping) or "generator" not in block:
                raise OptionError(key, "must be {generator: <generator block>, family: ...} "
                                  f"(+generator@generator.{key}.generator=OPTION)")
            extra = sorted(str(k) for k in block if k not in _KEYS)
            if extra:
                raise OptionError(f"{key}.{extra[0]}", f"unknown key; a member has {_KEYS}")
            fam = block.get("family")
            if fam is not None and (not isinstance(fam, str) or not fam.strip()):
                raise OptionError(f"{key}.family", f"must be a non-empty string or null, "
                                  f"got {fam!r}")
            sampling = dict(block.get("sampling") or {})
            bad = sorted(str(k) for k in sampling if k not in SAMPLING_KEYS)
            if bad:
                raise OptionError(f"{key}.sampling.{bad[0]}",
                                  f"unknown; a member may override {SAMPLING_KEYS}")
            _check_sampling(key, sampling)
            gen = build(block["generator"], f"generator.{key}.generator")
            if gen is None:
                raise OptionError(f"{key}.generator", "must name a generator (not none)")
            if isinstance(gen, GeneratorSweep):
                raise OptionError(f"{key}.generator", "a sweep cannot hold a sweep")
            ident = repr((sorted(gen.cache_params().items(), key=lambda kv: kv[0]),
                          sorted(sampling.items())))
            if ident in seen:
                raise OptionError(f"{key}.generator", f"the same generator and sampling as "
                                  f"members.{seen[ident]} (its answers would be identical)")
            seen[ident] = str(name)
            out.append(SweepMember(str(name), gen,
                                   fam.strip().lower() if isinstance(fam, str)
                                   else family(generator_name(gen)), fam is not None,
                                   sampling))
        self.members: tuple[SweepMember, ...] = tuple(out)

    @property
    def primary(self) -> Generator:
        return self.members[0].generator

    def with_generators(self, wrap: Any) -> GeneratorSweep:
        """The same sweep with each member's generator passed through ``wrap`` (the memo)."""
        new = object.__new__(GeneratorSweep)
        new.members = tuple(SweepMember(m.name, wrap(m.generator), m.family, m.declared,
                                        m.sampling) for m in self.members)
        return new

    # A sweep is a config option of the generator group, not a generator: the run unpacks it
    # (bench.pipeline.components.build_answers); these keep a misuse loud.
    def cache_params(self) -> dict[str, object]:
        return {"sweep": [{"name": m.name, "generator": m.generator.cache_params(),
                           "family": m.family, "sampling": dict(m.sampling)}
                          for m in self.members]}

    def close(self) -> None:
        for m in self.members:
            m.generator.close()


def _check_sampling(key: str, sampling: Mapping[str, Any]) -> None:
    """The ranges ``generation.*`` is held to (``check_generation_config``)."""
    def number(k: str) -> float | None:
        v = sampling.get(k)
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise OptionError(f"{key}.sampling.{k}", f"must be a number, got {v!r}")
        return float(v)

    for k in ("max_tokens", "seed"):
        v = sampling.get(k)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
            raise OptionError(f"{key}.sampling.{k}", f"must be an integer, got {v!r}")
    mt, t, p = number("max_tokens"), number("temperature"), number("top_p")
    if mt is not None and mt < 1:
        raise OptionError(f"{key}.sampling.max_tokens", f"must be >= 1, got {mt:g}")
    if t is not None and t < 0:
        raise OptionError(f"{key}.sampling.temperature", f"must be >= 0, got {t:g}")
    if p is not None and not 0 < p <= 1:
        raise OptionError(f"{key}.sampling.top_p", f"must be in (0, 1], got {p:g}")
