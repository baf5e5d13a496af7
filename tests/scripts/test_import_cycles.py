"""scripts/import_cycles.py on a small package: function-level imports close cycles, imports
under TYPE_CHECKING do not, relative and ``from pkg import module`` imports resolve."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("import_cycles",
                                                  ROOT / "scripts" / "import_cycles.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["import_cycles"] = mod
    spec.loader.exec_module(mod)
    return mod


def _package(tmp: Path, files: dict[str, str]) -> Path:
    root = tmp / "pkg"
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_function_level_and_relative_imports_close_cycles(tmp_path: Path) -> None:
    ic = _script()
    root = _package(tmp_path, {
        "__init__.py": "",
        "a.py": "from pkg.b import f\n",
        "b.py": "def f():\n    from . import a\n    return a\n",
        "sub/__init__.py": "",
        "sub/c.py": "from pkg import d\n",
        "d.py": "from .sub.c import x\n",
        "e.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import f\n",
        "f.py": "import pkg.e\n"})
    deps, lines = ic.module_graph(root)
    assert deps["pkg.a"] == {"pkg.b"} and deps["pkg.b"] == {"pkg", "pkg.a"}
    assert deps["pkg.sub.c"] == {"pkg", "pkg.d"} and deps["pkg.d"] == {"pkg.sub.c"}
    assert deps["pkg.e"] == set()  # annotations only
    assert ic.cycles(deps) == [["pkg.a", "pkg.b"], ["pkg.d", "pkg.sub.c"]]
    assert lines[("pkg.b", "pkg.a")] == [2]
    assert ic.main([str(root)]) == 1


def test_a_package_without_cycles_passes(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    ic = _script()
    root = _package(tmp_path, {"__init__.py": "", "a.py": "import pkg.b\n", "b.py": "x = 1\n"})
    assert ic.main([str(root)]) == 0
    assert "no import cycles (3 modules" in capsys.readouterr().out
