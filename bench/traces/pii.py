"""A regex baseline for scrubbing personal data out of query / answer text before storage.

What it replaces (each by a ``<KIND>`` placeholder): e-mail addresses, payment card numbers
(13-19 digits, spaces/dashes allowed, Luhn-valid only, so order numbers survive), IBANs,
US social security numbers, phone numbers (7-15 digits written with a ``+`` country code or
separators; a bare run of digits is taken for an id), IPv4 addresses. It is a baseline,
written by hand because the patterns are a few lines and the well-kept alternative
(presidio) needs a spaCy model download: names and addresses in free text are NOT found.
``scrub`` returns the text and how many spans it replaced, so an import can report it.
"""

from __future__ import annotations

import re

_EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}")
_CARD = re.compile(r"(?<!\d)(?:\d[ -]?){12,18}\d(?!\d)")
_IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,4})?\b")
_SSN = re.compile(r"(?<!\d)\d{3}-\d{2}-\d{4}(?!\d)")
_PHONE = re.compile(r"(?<![\w+])\+?\d{1,3}?[ .-]?\(?\d{2,4}\)?(?:[ .-]?\d{2,4}){2,3}(?!\d)")
_IPV4 = re.compile(r"(?<![\d.])(?:(?:25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(?:25[0-5]|2[0-4]\d|1?\d?\d)"
                   r"(?![\d.])")


def _luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _phone_like(s: str) -> bool:
    """7-15 digits, written with a ``+`` or separators: a bare digit run is an id."""
    digits = re.sub(r"\D", "", s)
    return 7 <= len(digits) <= 15 and (s.startswith("+") or digits != s)


def scrub(text: str) -> tuple[str, int]:
    """``text`` with personal data replaced, and the number of replacements."""
    n = 0

    def sub(pattern: re.Pattern[str], label: str, s: str, check: object = None) -> str:
        nonlocal n

        def repl(m: re.Match[str]) -> str:
            nonlocal n
            if check is not None and not check(m.group(0)):  # type: ignore[operator]
                return m.group(0)
            n += 1
            return f"<{label}>"

        return pattern.sub(repl, s)

    out = sub(_EMAIL, "EMAIL", text)
    out = sub(_IBAN, "IBAN", out)
    out = sub(_CARD, "CARD", out,
              lambda s: _luhn(re.sub(r"\D", "", s)) and len(re.sub(r"\D", "", s)) >= 13)
    out = sub(_SSN, "SSN", out)
    out = sub(_IPV4, "IP", out)
    out = sub(_PHONE, "PHONE", out, _phone_like)
    return out, n
