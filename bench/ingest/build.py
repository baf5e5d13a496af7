"""``python -m bench.ingest.build --out DIR``: the offline ingestion benchmark with known truth.

Writes the raw-document dataset folder of docs/ingestion-benchmark.md (``manifest.jsonl``,
``files/``, ``truth/<doc_id>.json``, ``queries.jsonl``, ``oracle_corpus.jsonl`` and
``build.json``): SQuAD 2.0 paragraphs (the sample shipped in bench/ingest/data/squad2) and
FOLDOC entries (the folder ``make data`` builds) rendered by ``bench.ingest.render`` in every
layout, a share of them with planted PII, plus real pages of Debian's python3.11-doc. Seeded:
the same arguments write the same bytes. Like the FOLDOC builder, a folder whose ``build.json``
matches the arguments and builder version is left alone ("up to date"); ``--force`` rebuilds.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import random
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from bench.docs import INGESTION_BENCHMARK as INGESTION
from bench.errors import BenchError
from bench.ingest.render import LAYOUTS, RENDERERS, Rendered, pdf_safe
from bench.ingest.sources import (
    SQUAD_SAMPLE,
    Block,
    DocSpec,
    foldoc_docs,
    python_doc_pages,
    squad_docs,
)

#: bump when the output for the same arguments changes
BUILDER_VERSION = 1
PYDOC_PACKAGE = "python3.11-doc"
PYDOC_HTML = "usr/share/doc/python3.11/html"
FIRST = ("Alice", "Bram", "Chiara", "Dmitri", "Esther", "Farid", "Greta", "Hiroshi", "Ines",
         "Jonas", "Keiko", "Lars", "Maya", "Nikolai", "Olga", "Pedro")
LAST = ("Andersen", "Brennan", "Castillo", "Dubois", "Eriksen", "Fischer", "Garcia",
        "Hoffmann", "Ivanova", "Jansen", "Kowalski", "Lindqvist", "Moreau", "Novak")
#: manifest layout of each renderer (both scans are layout "scan", told apart by type)
MANIFEST_LAYOUT = {"scan_png": "scan", "scan_pdf": "scan"}


@dataclasses.dataclass(frozen=True)
class BuildOptions:
    n_squad: int = 36
    n_foldoc: int = 18
    n_real: int = 30
    real: str = "python-doc"  # python-doc | none
    pii_share: float = 0.34
    seed: int = 0


class _OneLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise BenchError(f"{self.prog}: {message} (see --help)")


def plant_pii(spec: DocSpec, rng: random.Random) -> tuple[DocSpec, list[dict[str, str]]]:
    """Append a contact paragraph with a synthetic name, e-mail and phone number (555-01xx
    and Ofcom's drama range: numbers reserved for fiction)."""
    first, last = rng.choice(FIRST), rng.choice(LAST)
    name = f"{first} {last}"
    email = f"{first.lower()}.{last.lower()}@example.org"
    phone = (f"(212) 555-01{rng.randrange(100):02d}" if rng.random() < 0.5
             else f"+44 20 7946 0{rng.randrange(1000):03d}")
    text = (f"For corrections to this page, contact {name} at {email} or call {phone}.")
    pii = [{"type": "PERSON", "text": name}, {"type": "EMAIL_ADDRESS", "text": email},
           {"type": "PHONE_NUMBER", "text": phone}]
    return dataclasses.replace(spec, blocks=(*spec.blocks, Block("paragraph", text))), pii


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def _queries_for(spec: DocSpec, truth_text: str, pdf: bool) -> list[dict[str, Any]]:
    """The spec's queries whose answering unit (and an answer, if any) the rendered truth
    still has; qrels point at the document."""
    have = _norm(truth_text)
    out = []
    for q in spec.queries:
        unit_text = next((b.text for b in spec.blocks if b.unit == q.unit
                          and b.kind == "paragraph"), "")
        opening = _norm(pdf_safe(unit_text) if pdf else unit_text)[:60]
        if not opening or opening not in have:
            continue
        answers = [a for a in q.expected_answers if _norm(a) in have]
        if q.expected_answers and not answers:
            continue
        row: dict[str, Any] = {"query_id": q.query_id, "query": q.query,
                               "category": q.category,
                               "relevant_document_ids": [spec.doc_id] if q.grade == 1
                               else [{"id": spec.doc_id, "grade": q.grade}]}
        if answers:
            row["expected_answers"] = answers
        out.append(row)
    return out


def _truth(spec: DocSpec, r: Rendered, pii: list[dict[str, str]], date: str | None) -> dict:
    text = "\n\n".join(b["text"] for b in r.blocks)
    planted = [p for p in pii if p["text"] in text]
    return {"doc_id": spec.doc_id, "title": r.blocks[0]["text"] if r.blocks else spec.title,
            "date": date, "language": spec.language, "text": text, "blocks": r.blocks,
            "boilerplate": r.boilerplate, "tables": r.tables, "pii": planted,
            "pages": r.pages}


def _dump(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, sort_keys=False)


def build(out: Path, opts: BuildOptions, *, squad: Path, foldoc: Path,
          cache_dir: Path | None, force: bool = False) -> dict[str, Any] | None:
    """Build into ``out`` unless current; returns build.json's content (None: up to date)."""
    record = {"builder_version": BUILDER_VERSION, "options": dataclasses.asdict(opts)}
    current = out / "build.json"
    if not force and current.is_file():
        try:
            old = json.loads(current.read_text(encoding="utf-8"))
        except json.JSONDecodeError:
            old = {}
        if {k: old.get(k) for k in record} == record:
            print(f"ingest: {out} is up to date (builder version {BUILDER_VERSION})",
                  flush=True)
            return None
    t0 = time.perf_counter()
    rng = random.Random(opts.seed)
    generated: list[DocSpec] = []
    if opts.n_squad:
        generated += squad_docs(squad, opts.n_squad)
    if opts.n_foldoc:
        generated += foldoc_docs(foldoc, opts.n_foldoc, seed=opts.seed)
    real: list[DocSpec] = []
    sources: dict[str, Any] = {}
    if opts.real == "python-doc" and opts.n_real:
        real, sources["python-doc"] = _python_doc(cache_dir, opts.n_real, opts.seed)
    print(f"ingest: {len(generated)} generated + {len(real)} real documents", flush=True)

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    (tmp / "files").mkdir()
    (tmp / "truth").mkdir()
    manifest: list[dict[str, Any]] = []
    queries: list[dict[str, Any]] = []
    oracle: list[dict[str, Any]] = []
    # layouts dealt round-robin per source over a seeded order of its documents
    by_source: dict[str, list[DocSpec]] = {}
    for s in generated:
        by_source.setdefault(s.source, []).append(s)
    plan: list[tuple[DocSpec, str]] = []
    for src in sorted(by_source):
        docs = sorted(by_source[src], key=lambda d: d.doc_id)
        random.Random(f"{opts.seed}:{src}").shuffle(docs)
        plan += [(d, LAYOUTS[i % len(LAYOUTS)]) for i, d in enumerate(docs)]
    plan.sort(key=lambda p: p[0].doc_id)
    for spec, layout in plan:
        pii: list[dict[str, str]] = []
        if rng.random() < opts.pii_share:
            spec, pii = plant_pii(spec, rng)
        r = RENDERERS[layout](spec, opts.seed + len(manifest))
        date = "2024-01-01" if r.ext in ("html", "docx") else None
        truth = _truth(spec, r, pii, date)
        name = f"files/{spec.doc_id}.{r.ext}"
        (tmp / name).write_bytes(r.data)
        (tmp / "truth" / f"{spec.doc_id}.json").write_text(_dump(truth) + "\n",
                                                           encoding="utf-8")
        manifest.append({"doc_id": spec.doc_id, "file": name, "type": r.type,
                         "layout": MANIFEST_LAYOUT.get(layout, layout), "source": spec.source,
                         "truth": f"truth/{spec.doc_id}.json"})
        queries += _queries_for(spec, truth["text"], r.ext in ("pdf", "png"))
        oracle.append({"doc_id": spec.doc_id, "title": truth["title"], "text": truth["text"]})
    for spec in real:
        assert spec.raw_file is not None
        name = f"files/{spec.doc_id}.{spec.raw_type}"
        shutil.copyfile(spec.raw_file, tmp / name)
        blocks = [{"kind": b.kind, "text": b.text, "page": 1} for b in spec.blocks]
        text = "\n\n".join(b.text for b in spec.blocks)
        truth = {"doc_id": spec.doc_id, "title": spec.title, "date": None,
                 "language": spec.language, "text": text, "blocks": blocks,
                 "boilerplate": [], "tables": [], "pii": [], "pages": 1}
        (tmp / "truth" / f"{spec.doc_id}.json").write_text(_dump(truth) + "\n",
                                                           encoding="utf-8")
        manifest.append({"doc_id": spec.doc_id, "file": name, "type": spec.raw_type,
                         "layout": "real_html", "source": spec.source,
                         "truth": f"truth/{spec.doc_id}.json"})
        oracle.append({"doc_id": spec.doc_id, "title": spec.title, "text": text})
    for fname, rows in (("manifest.jsonl", manifest), ("queries.jsonl", queries),
                        ("oracle_corpus.jsonl", oracle)):
        (tmp / fname).write_text("".join(_dump(r) + "\n" for r in rows), encoding="utf-8")
    pages = 0
    for m in manifest:
        pages += json.loads((tmp / m["truth"]).read_text(encoding="utf-8"))["pages"]
    counts = {
        "files": len(manifest), "pages": pages, "queries": len(queries),
        "by_type_layout": {f"{t}/{lay}": n for (t, lay), n in sorted(
            Counter((m["type"], m["layout"]) for m in manifest).items())},
        "by_source": dict(sorted(Counter(m["source"] for m in manifest).items())),
        "with_pii": sum(1 for m in manifest if json.loads(
            (tmp / m["truth"]).read_text(encoding="utf-8"))["pii"]),
    }
    sources["squad2"] = {"path": "bench/ingest/data/squad2" if squad == SQUAD_SAMPLE
                         else str(squad), "license": "CC BY-SA 4.0 (SQuAD 2.0, Wikipedia)"}
    if opts.n_foldoc:
        sources["foldoc"] = {"license": "GNU FDL 1.1 or later (FOLDOC, editor Denis Howe)",
                             "manifest_sha256": _sha256(foldoc / "manifest.json")
                             if (foldoc / "manifest.json").is_file() else None}
    result = {**record, "counts": counts, "sources": sources}
    (tmp / "build.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    old_dir = out.parent / f".{out.name}.old-{os.getpid()}"
    if out.exists():
        out.rename(old_dir)
    tmp.rename(out)
    shutil.rmtree(old_dir, ignore_errors=True)
    print(f"ingest: wrote {out}: {counts['files']} files, {pages} pages, "
          f"{counts['queries']} queries in {time.perf_counter() - t0:.1f} s", flush=True)
    return result


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _python_doc(cache_dir: Path | None, n: int, seed: int) -> tuple[list[DocSpec], dict]:
    """Fetch (once, into ``cache_dir``) and unpack python3.11-doc; pick ``n`` pages."""
    from bench.data.foldoc.deb import describe_deb, extract_members, fetch_deb

    if cache_dir is None:
        raise BenchError("--cache-dir is needed for --real python-doc (the .deb is kept there)")
    deb = fetch_deb(cache_dir, PYDOC_PACKAGE)
    unpacked = cache_dir / f"{deb.stem}.unpacked"
    html_root = unpacked / PYDOC_HTML
    if not (html_root / "_sources").is_dir():
        shutil.rmtree(unpacked, ignore_errors=True)
        extract_members(deb, unpacked, (f"./{PYDOC_HTML}/",))
    src = describe_deb(deb)
    return python_doc_pages(html_root, n, seed=seed), {
        **dataclasses.asdict(src), "deb": deb.name,
        "license": "PSF License (Python documentation), see the package's copyright file"}


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = _OneLineParser(prog="python -m bench.ingest.build",
                        description=(__doc__ or "").splitlines()[0],
                        epilog=INGESTION.help_line())
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--n-squad", type=int, default=BuildOptions.n_squad)
    ap.add_argument("--n-foldoc", type=int, default=BuildOptions.n_foldoc)
    ap.add_argument("--n-real", type=int, default=BuildOptions.n_real)
    ap.add_argument("--real", choices=("python-doc", "none"), default=BuildOptions.real)
    ap.add_argument("--pii-share", type=float, default=BuildOptions.pii_share)
    ap.add_argument("--seed", type=int, default=BuildOptions.seed)
    ap.add_argument("--squad", type=Path, default=SQUAD_SAMPLE,
                    help="a folder with paragraphs.jsonl + questions.jsonl")
    ap.add_argument("--foldoc", type=Path, default=Path(".data/foldoc"),
                    help="a built FOLDOC benchmark (make data)")
    ap.add_argument("--cache-dir", type=Path, default=Path(".data/debs"))
    ap.add_argument("--force", action="store_true")
    a = ap.parse_args(argv)
    for key in ("n_squad", "n_foldoc", "n_real"):
        if not 0 <= getattr(a, key) <= 10_000:
            raise BenchError(f"--{key.replace('_', '-')} must be between 0 and 10000, "
                             f"got {getattr(a, key)}")
    if not 0.0 <= a.pii_share <= 1.0:
        raise BenchError(f"--pii-share must be between 0 and 1, got {a.pii_share}")
    if not 0 <= a.seed < 2**63:
        raise BenchError(f"--seed must be between 0 and 2**63 - 1, got {a.seed}")
    if a.n_squad + a.n_foldoc + (a.n_real if a.real != "none" else 0) == 0:
        raise BenchError("nothing to build: every --n-* is 0")
    for probe in (a.out, *a.out.parents):
        if probe.exists():
            if not probe.is_dir():
                raise BenchError(f"--out {a.out}: {probe} is a file, not a directory")
            break
    if a.n_squad:
        for f in ("paragraphs.jsonl", "questions.jsonl"):
            if not (a.squad / f).is_file():
                raise BenchError(f"--squad {a.squad}: {f} not found")
    if a.n_foldoc and not (a.foldoc / "corpus.jsonl").is_file():
        raise BenchError(f"--foldoc {a.foldoc}: corpus.jsonl not found: build FOLDOC first "
                         "(`make data`) or pass --n-foldoc 0")
    return a


def main(argv: Sequence[str] | None = None) -> int:
    try:
        a = _parse(argv)
        opts = BuildOptions(n_squad=a.n_squad, n_foldoc=a.n_foldoc, n_real=a.n_real,
                            real=a.real, pii_share=a.pii_share, seed=a.seed)
        build(a.out, opts, squad=a.squad, foldoc=a.foldoc, cache_dir=a.cache_dir,
              force=a.force)
    except BenchError as e:
        print(f"error: {e.one_line()}", file=sys.stderr)
        return e.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
