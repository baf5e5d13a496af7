"""Language identification per document with lingua (its models ship inside the wheel).

The detector is built once per set of candidate languages (ISO 639-1 codes); ``None`` as the
set means every language lingua knows. A text lingua cannot decide on (too short, no letters)
is ``detected = ""`` and counts as a miss.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from bench.ingest.metrics._deps import need

#: candidate languages by default: the benchmark's (English) and the languages a parser's
#: mojibake most often gets mistaken for; a smaller set loads faster and confuses less
DEFAULT_LANGUAGES = ("en", "de", "fr", "es", "it", "pt", "nl", "sv", "da", "pl", "ru", "tr")


@lru_cache(maxsize=4)
def _detector(languages: tuple[str, ...] | None) -> Any:
    lingua = need("lingua", "lingua-language-detector", "the ingestion metric language_match")
    b = lingua.LanguageDetectorBuilder
    if languages is None:
        return b.from_all_languages().build()
    codes = [getattr(lingua.IsoCode639_1, c.upper()) for c in languages]
    return b.from_iso_codes_639_1(*codes).build()


def detect_language(text: str, languages: tuple[str, ...] | None = DEFAULT_LANGUAGES) -> str:
    """The ISO 639-1 code lingua detects for ``text`` ("" when undecided)."""
    lang = _detector(languages).detect_language_of(text)
    return "" if lang is None else str(lang.iso_code_639_1.name).lower()


def language_match(text: str, truth: Mapping[str, Any], *,
                   languages: tuple[str, ...] | None = DEFAULT_LANGUAGES) -> dict[str, Any]:
    """``detected`` (code), ``language_match`` (1.0 / 0.0) against the truth's ``language``;
    ``{}`` when the truth has no language label."""
    label = truth.get("language")
    if not label:
        return {}
    detected = detect_language(text, languages)
    return {"detected": detected, "language_match": float(detected == str(label).lower())}
