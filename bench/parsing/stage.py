"""The `parsing` stage's entry in the stage list: its component and its checks before work.

The parse itself runs where the corpus is made — ``dataset=raw_docs`` loads a folder of raw
files through the ``parser`` group (``bench.parsing.dataset``) — so every stage after it
(chunking, embedding, retrieval, generation) reads the parsed documents as it reads any
corpus, and the corpus fingerprint (which keys every artifact downstream) is that of the
parsed text. This builder only checks that the two groups go together; the stage's report
is ``bench.parsing.report.write``.
"""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig

from bench.config.build import build, target_of, to_container
from bench.errors import ConfigError


def build_parser(cfg: DictConfig, device: str) -> dict[str, Any]:
    """``{"parser": the built parser}``; a parser without ``dataset=raw_docs`` (it would read
    nothing) or ``dataset=raw_docs`` without a parser is a config error."""
    from bench.parsing.dataset import RawDocsDataset

    parser = build(cfg.parser, "parser")
    raw = target_of(to_container(cfg.dataset), "dataset") is RawDocsDataset
    if parser is not None and not raw:
        raise ConfigError("parser", "a parser reads raw files: use dataset=raw_docs "
                                    "dataset.path=DIR (or parser=none)")
    if parser is None and raw:
        raise ConfigError("parser", "dataset=raw_docs parses raw files: pick a parser "
                                    "(parser=pypdf, parser=oracle, ...; conf/parser/)")
    return {"parser": parser}
