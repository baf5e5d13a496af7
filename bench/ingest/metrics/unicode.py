"""Unicode hygiene of extracted text: each a count and a rate.

- ``nfkc_disagree``: word tokens whose NFC and NFKC forms differ (ligatures such as "ﬁ",
  full-width letters, superscripts: what a PDF text layer often leaves in); rate per token.
- ``invisible``: default-ignorable code points (Unicode's ``Default_Ignorable_Code_Point``:
  zero-width spaces and joiners, soft hyphens, BOMs, variation selectors...) plus other
  format / control characters except tab, line feed and carriage return; rate per character.
- ``mixed_script``: word tokens mixing letters of two or more scripts (Latin with Cyrillic or
  Greek, the confusable "pаypal" with a Cyrillic "а"), the mixed-script test of UTS #39;
  Han, Hiragana and Katakana count as one script (Japanese mixes them); rate per token.

NFC / NFKC come from ``unicodedata``; the properties from the ``regex`` module (``\\p{DI}``,
``\\p{Script=...}``), which tracks the Unicode database; the counting is ours.
"""

from __future__ import annotations

import unicodedata

from bench.ingest.metrics._deps import need

#: scripts told apart for the mixed-script test (Common / Inherited letters never count)
SCRIPTS = ("Latin", "Greek", "Cyrillic", "Armenian", "Hebrew", "Arabic", "Devanagari",
           "Bengali", "Thai", "Georgian", "Hangul", "Han", "Hiragana", "Katakana")
_JAPANESE = {"Han", "Hiragana", "Katakana"}


def unicode_counts(text: str) -> dict[str, float]:
    """Counts and rates of NFC/NFKC-disagreeing tokens, invisible code points and mixed-script
    tokens in ``text`` (rates are 0.0 for an empty text)."""
    regex = need("regex", "regex", "the ingestion metric unicode_counts")
    tokens = regex.findall(r"\w+", text)
    nfkc = sum(1 for t in tokens
               if unicodedata.normalize("NFC", t) != unicodedata.normalize("NFKC", t))
    invisible = len(regex.findall(r"\p{DI}|(?![\t\n\r])[\p{Cf}\p{Cc}]", text))
    script_res = {s: regex.compile(rf"\p{{Script={s}}}") for s in SCRIPTS}
    mixed = 0
    for t in tokens:
        if t.isascii():  # one script (or none): the common case, skipped cheaply
            continue
        scripts = {s for s, r in script_res.items() if r.search(t)}
        if len(scripts) > 1 and not scripts <= _JAPANESE:
            mixed += 1
    n_tok, n_chr = len(tokens), len(text)
    return {"tokens": float(n_tok), "chars": float(n_chr),
            "nfkc_disagree": float(nfkc), "nfkc_disagree_rate": nfkc / n_tok if n_tok else 0.0,
            "invisible": float(invisible), "invisible_rate": invisible / n_chr if n_chr else 0.0,
            "mixed_script": float(mixed), "mixed_script_rate": mixed / n_tok if n_tok else 0.0}
