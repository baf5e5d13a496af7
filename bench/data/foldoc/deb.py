"""The Debian ``dict-foldoc`` package: fetch the .deb, describe it, unpack its dictd files.

In: a cache folder (``fetch_deb``: apt-get, then urllib on apt's URI) or a .deb path. Out: the
.deb path, its ``Source`` record (package, version, sha256, for the manifest) and the paths of
``foldoc.index`` / ``foldoc.dict.dz`` unpacked by ``extract_dictd`` (dpkg-deb, or a pure-Python
ar + tar fallback).
"""

from __future__ import annotations

import hashlib
import io
import re
import shutil
import subprocess
import tarfile
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from bench.errors import BenchError

PACKAGE = "dict-foldoc"
INDEX_MEMBER = "usr/share/dictd/foldoc.index"
DICT_MEMBER = "usr/share/dictd/foldoc.dict.dz"


@dataclass(frozen=True)
class Source:
    """The .deb a benchmark was built from (recorded in the manifest)."""

    deb: str
    package: str
    version: str
    sha256: str


def fetch_deb(cache_dir: Path, package: str = PACKAGE) -> Path:
    """Download ``package``'s .deb into ``cache_dir`` (reusing one already there).

    ``apt-get download``; on failure ``apt-get update`` once and retry; if apt still fails,
    fetch the URL from ``apt-get download --print-uris`` with urllib and check its sha256.
    """
    cache_dir.mkdir(parents=True, exist_ok=True)
    if found := sorted(cache_dir.glob(f"{package}_*.deb")):
        return found[-1]
    if shutil.which("apt-get") is None:
        raise BenchError(f"apt-get not found: download a {package} .deb by hand and pass "
                         "--deb PATH")
    if not _apt(["download", package], cache_dir):
        print("foldoc: apt-get download failed; running apt-get update and retrying",
              flush=True)
        _apt(["update"], cache_dir)
        if not _apt(["download", package], cache_dir):
            print("foldoc: apt-get download failed again; fetching its URI with urllib",
                  flush=True)
            _download_by_uri(cache_dir, package)
    if found := sorted(cache_dir.glob(f"{package}_*.deb")):
        return found[-1]
    raise BenchError(f"could not download {package} into {cache_dir}: pass --deb PATH")


def _apt(args: list[str], cwd: Path) -> bool:
    proc = subprocess.run(["apt-get", *args], cwd=cwd, capture_output=True, text=True,
                          check=False)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        print(f"foldoc: apt-get {' '.join(args)} exited {proc.returncode}: {last}", flush=True)
    return proc.returncode == 0


def _download_by_uri(cache_dir: Path, package: str = PACKAGE) -> None:
    proc = subprocess.run(["apt-get", "download", "--print-uris", package], cwd=cache_dir,
                          capture_output=True, text=True, check=False)
    # line format: 'URL' FILENAME SIZE SHA256:HEX
    m = re.search(r"'(\S+)'\s+(\S+\.deb)\s+\d+\s+SHA256:([0-9a-f]{64})", proc.stdout)
    if m is None:
        raise BenchError(f"apt-get could not name a URI for {package} (is the package index "
                         "available? try `apt-get update`), or pass --deb PATH")
    url, name, sha = m.groups()
    tmp = cache_dir / f".{name}.part"
    with urllib.request.urlopen(url, timeout=120) as resp, tmp.open("wb") as out:
        shutil.copyfileobj(resp, out)
    if _sha256(tmp) != sha:
        tmp.unlink()
        raise BenchError(f"{url}: downloaded file does not match the sha256 apt expects")
    tmp.rename(cache_dir / name)


def describe_deb(deb: Path) -> Source:
    """Package and version from the Debian file name ``name_version_arch.deb``."""
    parts = urllib.parse.unquote(deb.name).removesuffix(".deb").split("_")
    package, version = (parts[0], parts[1]) if len(parts) == 3 else (deb.stem, "unknown")
    return Source(deb=deb.name, package=package, version=version, sha256=_sha256(deb))


def extract_dictd(deb: Path, dest: Path) -> tuple[Path, Path]:
    """Unpack the .deb into ``dest``; returns (foldoc.index, foldoc.dict.dz) paths."""
    extract_members(deb, dest, (INDEX_MEMBER, DICT_MEMBER))
    index, dict_dz = dest / INDEX_MEMBER, dest / DICT_MEMBER
    if not (index.is_file() and dict_dz.is_file()):
        raise BenchError(f"{deb} does not contain {INDEX_MEMBER} and {DICT_MEMBER}")
    return index, dict_dz


def extract_members(deb: Path, dest: Path, wanted: tuple[str, ...]) -> None:
    """Unpack ``deb`` into ``dest`` (dpkg-deb -x), or only the ``wanted`` members without it."""
    if shutil.which("dpkg-deb"):
        proc = subprocess.run(["dpkg-deb", "-x", str(deb), str(dest)], capture_output=True,
                              text=True, check=False)
        if proc.returncode != 0:
            raise BenchError(f"dpkg-deb -x {deb} failed: {proc.stderr.strip()}")
    else:  # not a Debian system (e.g. --deb on macOS): a .deb is an ar archive with a tarball
        _extract_ar_members(deb, dest, wanted)


def _extract_ar_members(deb: Path, dest: Path, wanted: tuple[str, ...]) -> None:
    raw = deb.read_bytes()
    if not raw.startswith(b"!<arch>\n"):
        raise BenchError(f"{deb} is not a .deb (ar) archive")
    pos = 8
    while pos + 60 <= len(raw):
        name = raw[pos:pos + 16].decode().strip().rstrip("/")
        size = int(raw[pos + 48:pos + 58].decode().strip())
        body = raw[pos + 60:pos + 60 + size]
        pos += 60 + size + size % 2  # members are 2-byte aligned
        if not name.startswith("data.tar"):
            continue
        try:
            with tarfile.open(fileobj=io.BytesIO(body), mode="r:*") as tar:
                for member in tar.getmembers():
                    path = member.name.removeprefix("./")
                    if path in wanted and member.isfile():
                        target = dest / path
                        target.parent.mkdir(parents=True, exist_ok=True)
                        fh = tar.extractfile(member)
                        assert fh is not None
                        target.write_bytes(fh.read())
        except tarfile.TarError as exc:
            raise BenchError(f"cannot read {name} in {deb} ({exc}): install dpkg-deb") from None
        return
    raise BenchError(f"{deb} has no data.tar member")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
