"""Shared parsing helpers for the file-based dataset loaders.

Every helper that can fail takes a ``Where`` (file + 1-based line) and raises
``bench.errors.InputError`` through it, so each loader reports ``path:line: message`` the same
way. JSON helpers take parsed values (``object``), CSV helpers take raw cell strings.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.errors import InputError


@dataclass(frozen=True)
class Where:
    """A position in an input file, used to build ``InputError`` s."""

    path: str
    line: int

    def error(self, message: str) -> InputError:
        return InputError(self.path, self.line, message)


def require_file(path: str | Path) -> Path:
    """Return ``path`` as a Path, or raise InputError (line 0) if it is not a readable file."""
    p = Path(path)
    if not p.is_file():
        raise InputError(p, 0, "file not found")
    return p


#: Largest relevance grade or id-like integer accepted: TREC tools (and our int32 doc
#: indices) hold these in 32-bit ints, so a bigger value could only end in an overflow later.
MAX_INT32 = 2**31 - 1


def decode_line(raw: bytes, where: Where) -> str:
    """``raw`` as UTF-8 text; invalid bytes are an InputError naming the line and column."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise where.error(f"invalid UTF-8 (byte 0x{raw[exc.start]:02x} at column "
                          f"{exc.start + 1}); save the file as UTF-8") from None


def read_text(path: str | Path) -> str:
    """The whole file as UTF-8 text (BOM dropped); invalid bytes name ``file:line``."""
    p = require_file(path)
    data = p.read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line_start = data.rfind(b"\n", 0, exc.start) + 1
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(p, line, f"invalid UTF-8 (byte 0x{data[exc.start]:02x} at column "
                                  f"{exc.start - line_start + 1}); save the file as UTF-8"
                         ) from None


def _reject_constant(name: str) -> Any:
    # json.loads accepts NaN/Infinity, which are not JSON and no field can hold
    raise ValueError(f"{name} is not valid JSON")


def loads_strict(text: str) -> Any:
    """``json.loads`` that rejects duplicate keys in one object and NaN/Infinity.

    Python's json keeps the LAST of duplicate keys silently; a file with two ``"text"`` keys
    is ambiguous, so it is an error (ValueError; callers add file:line).
    """

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in items:
            if key in out:
                raise ValueError(f"duplicate key {key!r} in one JSON object")
            out[key] = value
        return out

    return json.loads(text, object_pairs_hook=pairs, parse_constant=_reject_constant)


def iter_jsonl(path: str | Path) -> Iterator[tuple[Where, dict[str, Any]]]:
    """Yield ``(where, object)`` for each non-blank line of a JSONL file.

    Blank lines are skipped (a trailing newline is not data); anything else that is not a
    JSON object, invalid UTF-8, a duplicate key or NaN raises InputError naming the line.
    """
    p = require_file(path)
    with p.open("rb") as fh:
        for n, raw_bytes in enumerate(fh, start=1):
            where = Where(str(p), n)
            raw = decode_line(raw_bytes, where)
            if n == 1:
                raw = raw.removeprefix("\ufeff")
            if not raw.strip():
                continue
            try:
                obj = loads_strict(raw)
            except json.JSONDecodeError as exc:
                raise where.error(f"malformed JSON: {exc.msg} (column {exc.colno})") from None
            except (ValueError, RecursionError) as exc:
                raise where.error(f"malformed JSON: {exc}") from None
            if not isinstance(obj, dict):
                raise where.error(f"expected a JSON object, got {type(obj).__name__}")
            yield where, obj


def require_rows(path: str | Path, n_rows: int, what: str) -> None:
    """An input file that yielded no rows is an error: a run over nothing is not a result."""
    if n_rows == 0:
        raise InputError(path, 0, f"no {what}: the file is empty (or holds only blank lines "
                                  "/ a header)")


def check_id(value: str, label: str, where: Where) -> str:
    """An identifier: non-empty, no whitespace anywhere (TREC files split on whitespace, so an
    id with a space makes every exported run and qrels file unreadable), no control
    characters. ``label`` names it in the message (``field 'doc_id'``)."""
    if not value:
        raise where.error(f"{label} is empty")
    if any(ch.isspace() for ch in value):
        raise where.error(f"{label} is {_short(value)}: ids must not contain whitespace "
                          "(leading, trailing or inner)")
    if not value.isprintable():
        raise where.error(f"{label} is {_short(value)}: ids must not contain control "
                          "characters")
    return value


def json_id(value: object, key: str, where: Where) -> str:
    """A JSON string that is a valid id (see ``check_id``)."""
    if not isinstance(value, str):
        raise where.error(f"field '{key}' must be a string, got {type(value).__name__}")
    return check_id(value, f"field '{key}'", where)


def check_keys(obj: Mapping[str, Any], where: Where, *, required: Iterable[str],
               optional: Iterable[str], context: str = "") -> None:
    """Fail on a missing required key or on any key outside required + optional.

    Unknown keys are errors because a typo (``must_abstian``) would otherwise drop data silently.
    ``context`` prefixes the message when ``obj`` is nested (``relevant_document_ids[2]``).
    """
    required = tuple(required)
    allowed = (*required, *optional)
    pre = f"{context}: " if context else ""
    for key in required:
        if key not in obj:
            raise where.error(f"{pre}missing required field '{key}'")
    unknown = sorted(k for k in obj if k not in allowed)
    if unknown:
        raise where.error(f"{pre}unknown field(s) {', '.join(repr(k) for k in unknown)}; "
                          f"allowed fields: {', '.join(allowed)}")


def json_str(value: object, key: str, where: Where, *, allow_empty: bool = False) -> str:
    """A JSON string value; non-strings, and empty strings unless allowed, are errors."""
    if not isinstance(value, str):
        raise where.error(f"field '{key}' must be a string, got {type(value).__name__}")
    if not allow_empty and not value.strip():
        raise where.error(f"field '{key}' is empty")
    return value


def json_opt_str(value: object, key: str, where: Where) -> str | None:
    """A JSON string or null."""
    return None if value is None else json_str(value, key, where, allow_empty=True)


def json_str_list(value: object, key: str, where: Where) -> tuple[str, ...]:
    """A JSON list of non-empty strings (``null`` reads as an empty list)."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise where.error(f"field '{key}' must be a list of strings, got {type(value).__name__}")
    return tuple(json_str(v, f"{key}[{i}]", where) for i, v in enumerate(value))


def json_bool(value: object, key: str, where: Where) -> bool:
    """A JSON boolean; 0/1 or "true" are rejected so a wrong type is noticed."""
    if not isinstance(value, bool):
        raise where.error(f"field '{key}' must be true or false, got {value!r}")
    return value


def grade(value: object, key: str, where: Where) -> int:
    """A relevance grade: an int >= 0 (bools are not ints here)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_INT32:
        raise where.error(f"field '{key}' must be an integer >= 0 and <= {MAX_INT32}, got "
                          f"{_short(value)}")
    return value


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def iso_date(value: str | None, key: str, where: Where) -> str | None:
    """Check that ``value`` is an ISO-8601 date or datetime (kept as the given string)."""
    if value is None or value == "":
        return None
    try:
        datetime.fromisoformat(value)
    except ValueError:
        raise where.error(f"field '{key}' must be an ISO-8601 date, got {value!r}") from None
    return value


def cell_bool(value: str, key: str, where: Where) -> bool:
    """A CSV boolean cell: true/false/yes/no/1/0 (any case); an empty cell is false."""
    v = value.strip().lower()
    if v in ("", "false", "no", "0"):
        return False
    if v in ("true", "yes", "1"):
        return True
    raise where.error(f"column '{key}' must be true or false, got {value!r}")


def cell_list(value: str) -> tuple[str, ...]:
    """A ``;``-separated CSV list cell; items are stripped and empty items dropped."""
    return tuple(item.strip() for item in value.split(";") if item.strip())


def cell_grade(value: str, key: str, where: Where) -> int:
    """A CSV relevance grade cell: an integer >= 0 (an empty cell means 1)."""
    v = value.strip()
    if not v:
        return 1
    try:
        g = int(v)
    except ValueError:
        raise where.error(f"column '{key}' must be an integer >= 0, got {_short(value)}"
                          ) from None
    return grade(g, key, where)


def write_jsonl(path: Path, rows: Iterable[Mapping[str, Any]]) -> int:
    """Write rows as UTF-8 JSONL via a temp file + rename; returns the number of rows."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    n = 0
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            for row in rows:
                fh.write(json.dumps(row, ensure_ascii=False, sort_keys=False))
                fh.write("\n")
                n += 1
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; the output is an ordinary data file
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return n
