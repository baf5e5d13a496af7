"""scripts/gpu_check.sh + gpu_payload.py, checked without a GPU: the --cpu plumbing run (faiss
and vllm hidden, as on the lent device machine) and the size of what a device call carries."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_fp16_model_copy_halves_the_weights_and_keeps_the_rest(tmp_path: Path) -> None:
    from safetensors.numpy import load_file, save_file

    payload = _load("gpu_payload")
    src = tmp_path / "src"
    (src / "1_Pooling").mkdir(parents=True)
    w = np.arange(12, dtype=np.float32).reshape(3, 4) / 7
    save_file({"w": w, "ids": np.arange(3, dtype=np.int64)}, str(src / "model.safetensors"))
    for name in ("config.json", "tokenizer.json", "1_Pooling/config.json"):
        (src / name).write_text("{}")
    dest = payload.write_fp16_model(src, tmp_path / "out")
    got = load_file(str(dest / "model.safetensors"))
    assert got["w"].dtype == np.float16 and got["ids"].dtype == np.int64
    np.testing.assert_allclose(got["w"], w, rtol=1e-3)
    assert (dest / "1_Pooling" / "config.json").is_file()
    assert json.loads((dest / "PROVENANCE.json").read_text())["change"].startswith("floating")


@pytest.mark.slow
def test_carried_payload_fits_the_device_limit(tmp_path: Path) -> None:
    payload = _load("gpu_payload")
    out = tmp_path / "payload"
    payload.write_fp16_model(payload.packaged_model_path(), out / payload.MODEL_DIR)
    wheels = ROOT / ".gpu_payload" / "wheels"
    if wheels.is_dir():  # built by `scripts/gpu_payload.py` (needs PyPI): count them too
        shutil.copytree(wheels, out / "wheels")
    report = payload.payload_report(ROOT, out)
    # all-MiniLM-L6-v2 has 22.7M parameters: 2 bytes each in fp16
    assert 22_000_000 * 2 < report["model (fp16)"] < 24_000_000 * 2
    assert report["total"] <= payload.LIMIT_BYTES, report


@pytest.mark.slow
def test_cpu_plumbing_run_without_faiss_or_vllm(tmp_path: Path) -> None:
    env = {**os.environ, "OUT": str(tmp_path), "PYTHON": sys.executable}
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    proc = subprocess.run(
        ["bash", str(ROOT / "scripts" / "gpu_check.sh"), "--cpu", "--hide", "faiss,vllm",
         "--only", "env,nvml,embed,torch_flat,faiss,pipeline,gpu_tests,vllm"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = {r["section"]: r for r in json.loads((tmp_path / "gpu_check.json").read_text())["rows"]}
    assert {s: rows[s]["status"] for s in rows} == {
        "env": "ok", "nvml": "skip", "embed": "ok", "torch_flat": "ok", "faiss": "skip",
        "pipeline": "ok", "gpu_tests": "skip", "vllm": "skip"}
    assert rows["torch_flat"]["figures"]["ids_vs_numpy"] == 1.0
    assert rows["embed"]["figures"]["min_cos_vs_fp32"] > 0.999
    assert rows["pipeline"]["figures"]["exit"] == 0
    assert "cannot run on the lent device machine" in rows["vllm"]["note"]
    assert "| torch_flat | fp32 cpu | ok |" in (tmp_path / "gpu_check.md").read_text()
