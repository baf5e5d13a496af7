"""Request templates and response mappings of ``system=http``.

The request template is a JSON body in the config. A string that is exactly one placeholder
(``"{roles}"``) becomes that value with its type (the caller's roles stay a list); any other
string has its placeholders formatted in. Placeholders: ``{query}``, ``{query_id}``,
``{roles}``, ``{tenant}``.

The response mapping names dotted paths into the JSON body (``data.hits``; a list index is a
number: ``choices.0.message.content``):

==================  ==========================================================================
``documents``       the list of returned documents (ranked, best first)
``doc_id``          within each document: its id (mapped to the dataset's doc ids)
``score``           within each document: its score (absent: the service's order is the rank)
``passage``         within each document: the passage text the answer was built from
``answer``          the answer text
``citations``       the cited document ids (a list of strings)
``server_timings``  {stage: path}: the server's own stage times in ms
``delta``           streaming: within each SSE event, the answer text it adds
==================  ==========================================================================
"""

from __future__ import annotations

import json
import string
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bench.config.build import OptionError

PLACEHOLDERS = ("query", "query_id", "roles", "tenant")
RESPONSE_KEYS = ("documents", "doc_id", "score", "passage", "answer", "citations",
                 "server_timings", "delta")
_ITEM_KEYS = ("doc_id", "score", "passage")


class MappingError(ValueError):
    """A response does not fit the mapping; ``key`` is the mapping field
    (``response.documents``)."""

    def __init__(self, key: str, message: str) -> None:
        self.key = key
        super().__init__(f"{key}: {message}")


def _placeholders(text: str) -> list[str]:
    try:
        return [name for _, name, _, _ in string.Formatter().parse(text) if name is not None]
    except ValueError as exc:
        raise OptionError("request", f"bad placeholder in {text!r}: {exc}") from None


def check_template(template: Any, where: str = "request") -> None:
    """Every placeholder of the template is known (before any request)."""
    if isinstance(template, Mapping):
        for k, v in template.items():
            check_template(v, f"{where}.{k}")
    elif isinstance(template, list):
        for i, v in enumerate(template):
            check_template(v, f"{where}.{i}")
    elif isinstance(template, str):
        unknown = [n for n in _placeholders(template) if n not in PLACEHOLDERS]
        if unknown:
            raise OptionError(where, f"unknown placeholder {{{unknown[0]}}}; known: "
                              + ", ".join(f"{{{p}}}" for p in PLACEHOLDERS))


def fill(template: Any, values: Mapping[str, Any]) -> Any:
    """The request body for one query."""
    if isinstance(template, Mapping):
        return {k: fill(v, values) for k, v in template.items()}
    if isinstance(template, list):
        return [fill(v, values) for v in template]
    if isinstance(template, str):
        names = _placeholders(template)
        if len(names) == 1 and template == f"{{{names[0]}}}":
            return values[names[0]]
        return template.format(**{k: (json.dumps(v) if isinstance(v, list | tuple) else v)
                                  for k, v in values.items()})
    return template


def _path(p: Any, key: str) -> tuple[str, ...]:
    if not isinstance(p, str) or not p or any(not part for part in p.split(".")):
        raise OptionError(f"response.{key}", f"must be a dotted path like 'data.hits', got {p!r}")
    return tuple(p.split("."))


def get(body: Any, path: tuple[str, ...]) -> Any:
    """The value at ``path``; KeyError naming the first part that is not there."""
    cur = body
    for i, part in enumerate(path):
        if isinstance(cur, Mapping) and part in cur:
            cur = cur[part]
        elif isinstance(cur, list) and part.lstrip("-").isdigit() and -len(cur) <= int(part) \
                < len(cur):
            cur = cur[int(part)]
        else:
            have = (f"keys {', '.join(sorted(map(str, cur))[:8])}" if isinstance(cur, Mapping)
                    else f"a {type(cur).__name__}")
            at = ".".join(path[:i]) or "the top"
            raise KeyError(f"{'.'.join(path[:i + 1])!r} not found (at {at}: {have})")
    return cur


@dataclass(frozen=True)
class Parsed:
    doc_ids: tuple[str, ...] = ()
    scores: tuple[float, ...] | None = None
    passages: tuple[str, ...] = ()
    answer: str | None = None
    citations: tuple[str, ...] = ()
    server_ms: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class ResponseMapping:
    """The validated mapping (see the module docstring)."""

    documents: tuple[str, ...] | None
    doc_id: tuple[str, ...] | None
    score: tuple[str, ...] | None
    passage: tuple[str, ...] | None
    answer: tuple[str, ...] | None
    citations: tuple[str, ...] | None
    server_timings: tuple[tuple[str, tuple[str, ...]], ...]
    delta: tuple[str, ...] | None

    @classmethod
    def of(cls, raw: Mapping[str, Any], *, stream: bool) -> ResponseMapping:
        unknown = sorted(set(raw) - set(RESPONSE_KEYS))
        if unknown:
            raise OptionError(f"response.{unknown[0]}", "unknown mapping field; known: "
                              + ", ".join(RESPONSE_KEYS))
        paths = {k: None if raw.get(k) is None else _path(raw[k], k)
                 for k in RESPONSE_KEYS if k != "server_timings"}
        if paths["documents"] is None and paths["answer"] is None and paths["delta"] is None:
            raise OptionError("response", "must name documents and/or an answer (or, "
                              "streaming, its delta)")
        if paths["documents"] is not None and paths["doc_id"] is None:
            raise OptionError("response.doc_id", "must name each document's id (a path "
                              "within one item of response.documents)")
        for k in _ITEM_KEYS:
            if paths[k] is not None and paths["documents"] is None:
                raise OptionError(f"response.{k}", "is read within each document: set "
                                  "response.documents too")
        if paths["delta"] is not None and not stream:
            raise OptionError("response.delta", "is read from streamed events: set stream=true")
        timings = raw.get("server_timings") or {}
        if not isinstance(timings, Mapping):
            raise OptionError("response.server_timings", "must map stage names to paths")
        return cls(paths["documents"], paths["doc_id"], paths["score"], paths["passage"],
                   paths["answer"], paths["citations"],
                   tuple((str(k), _path(v, f"server_timings.{k}")) for k, v in timings.items()),
                   paths["delta"])

    @property
    def has_documents(self) -> bool:
        return self.documents is not None

    @property
    def has_answer(self) -> bool:
        return self.answer is not None or self.delta is not None

    def parse(self, body: Any, *, answer: str | None = None, partial: bool = False) -> Parsed:
        """The mapped fields of a JSON body (a streamed response: its last event, with the
        answer joined from the deltas). MappingError names the field that does not fit.
        ``partial``: a path that is not there is skipped (a streamed event carrying only
        some fields)."""
        out: dict[str, Any] = {}
        if self.documents is not None:
            docs = self._get(body, self.documents, "documents", partial)
            if docs is not None:
                out.update(self._documents(docs))
        if self.answer is not None and answer is None:
            got = self._get(body, self.answer, "answer", partial)
            if got is not None:
                if not isinstance(got, str):
                    raise MappingError("response.answer", f"expected text, got "
                                       f"{type(got).__name__}")
                out["answer"] = got
        if answer is not None:
            out["answer"] = answer
        if self.citations is not None:
            cites = self._get(body, self.citations, "citations", partial)
            if cites is not None:
                if not isinstance(cites, list):
                    raise MappingError("response.citations", "expected a list of ids, got "
                                       f"{type(cites).__name__}")
                out["citations"] = tuple(str(c) for c in cites)
        timings = []
        for stage, p in self.server_timings:
            v = self._get(body, p, f"server_timings.{stage}", partial)
            if v is None:
                continue
            if isinstance(v, bool) or not isinstance(v, int | float):
                raise MappingError(f"response.server_timings.{stage}", "expected ms (a "
                                   f"number), got {v!r}")
            timings.append((stage, float(v)))
        if timings:
            out["server_ms"] = tuple(timings)
        return Parsed(**out)

    @staticmethod
    def _get(body: Any, path: tuple[str, ...], key: str, partial: bool) -> Any:
        try:
            return get(body, path)
        except KeyError as exc:
            if partial:
                return None
            raise MappingError(f"response.{key}", str(exc.args[0])) from None

    def _documents(self, docs: Any) -> dict[str, Any]:
        if not isinstance(docs, list):
            raise MappingError("response.documents", f"expected a list, got "
                               f"{type(docs).__name__}")
        ids, scores, texts = [], [], []
        assert self.doc_id is not None
        for i, item in enumerate(docs):
            doc_id = self._get(item, self.doc_id, f"doc_id (document {i})", False)
            if not isinstance(doc_id, str | int) or isinstance(doc_id, bool):
                raise MappingError("response.doc_id", f"document {i}: expected an id, got "
                                   f"{doc_id!r}")
            ids.append(str(doc_id))
            if self.score is not None:
                s = self._get(item, self.score, f"score (document {i})", False)
                if isinstance(s, bool) or not isinstance(s, int | float):
                    raise MappingError("response.score", f"document {i}: expected a number, "
                                       f"got {s!r}")
                scores.append(float(s))
            if self.passage is not None:
                t = self._get(item, self.passage, f"passage (document {i})", False)
                if not isinstance(t, str):
                    raise MappingError("response.passage", f"document {i}: expected text")
                texts.append(t)
        return {"doc_ids": tuple(ids), "scores": None if self.score is None else tuple(scores),
                "passages": tuple(texts)}

    def delta_of(self, event: Any) -> str:
        """The answer text one streamed event adds ('' when it carries none)."""
        if self.delta is None:
            return ""
        try:
            got = get(event, self.delta)
        except KeyError:
            return ""
        if got is None:
            return ""
        if not isinstance(got, str):
            raise MappingError("response.delta", f"expected text, got {type(got).__name__}")
        return got
