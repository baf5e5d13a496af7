"""Bytes to text for HTML and plain-text files, or one line saying why not.

The order browsers use, cut to what a file on disk has: a byte-order mark, then the charset
the document declares in its first 4 KiB (``<meta charset>`` / ``http-equiv``), then strict
UTF-8. A file in an encoding it does not declare and that is not UTF-8 is ``failed`` with that
reason — never decoded with replacement characters that would pass for text.
"""

from __future__ import annotations

import codecs
import re

_BOMS = ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"),
         (codecs.BOM_UTF16_BE, "utf-16-be"))
_META = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.I)


class EncodingError(Exception):
    """The file's bytes cannot be read as text; the message is the ``failed`` reason."""


def decode_text(data: bytes, *, html: bool) -> str:
    for bom, enc in _BOMS:
        if data.startswith(bom):
            return _decode(data[len(bom):], enc, "its byte-order mark")
    if html:
        m = _META.search(data[:4096])
        if m is not None:
            name = m.group(1).decode("ascii", "replace")
            try:
                enc = codecs.lookup(name).name
            except LookupError:
                raise EncodingError(f"unknown encoding: the page declares charset {name!r}, "
                                    "which Python does not know") from None
            return _decode(data, enc, f"its declared charset {name!r}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise EncodingError(f"unknown encoding: no charset declared and not UTF-8 (byte "
                            f"{data[exc.start]:#04x} at offset {exc.start})") from None


def _decode(data: bytes, enc: str, why: str) -> str:
    try:
        return data.decode(enc)
    except UnicodeDecodeError as exc:
        raise EncodingError(f"bytes not valid in {enc}, {why} (offset {exc.start})") from None
