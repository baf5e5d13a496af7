"""Drop stale numba caches when any kernel source changes.

numba invalidates a cached function only when ITS OWN source file changes. The kernels here
compile leaves from ``_core.py`` (and helpers from sibling modules) into their machine code,
so after an edit of ``_core.py`` numba would go on loading the old code from its cache — a
silent wrong result. On import we hash every kernel source; when the hash differs from the
stamp written beside the caches, this package's cache files are deleted first and the
kernels recompile once.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
STAMP = PACKAGE / "__pycache__" / "kernel-sources.sha256"


def sources_hash() -> str:
    h = hashlib.sha256()
    for path in sorted(PACKAGE.rglob("*.py")):
        h.update(str(path.relative_to(PACKAGE)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def ensure_fresh_cache() -> bool:
    """Delete stale caches if the sources changed; True when caches were dropped.

    Read-only installs (no write access to the package) are left alone: numba cannot
    write caches there either, so nothing stale can be loaded from them.
    """
    digest = sources_hash()
    try:
        if STAMP.is_file() and STAMP.read_text().strip() == digest:
            return False
        for pattern in ("*.nbi", "*.nbc"):
            for cached in PACKAGE.rglob(pattern):
                cached.unlink(missing_ok=True)
        STAMP.parent.mkdir(exist_ok=True)
        tmp = STAMP.with_name(f".{STAMP.name}.{os.getpid()}")
        tmp.write_text(digest + "\n")
        os.replace(tmp, STAMP)
    except OSError:
        return False
    return True
