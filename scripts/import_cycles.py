"""Runtime import cycles among the modules of a package (default ``bench``).

Every import statement of a module counts — module level and function level alike, since a
function-level import that closes a cycle is still a cycle at run time — except those under
``if TYPE_CHECKING:`` (annotations only). An import names the longest module of the package
it reaches (``from bench.a.b import c`` -> ``bench.a.b`` when that module exists). Cycles are
the strongly connected components of more than one module (Tarjan's algorithm).

    python scripts/import_cycles.py [PACKAGE_DIR]

Prints each cycle with the import lines that close it and exits 1, or prints
"no import cycles" and exits 0. ``make lint`` runs it.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path


def _type_checking_nodes(tree: ast.Module) -> set[int]:
    """ids of every node under an ``if TYPE_CHECKING:`` (or ``typing.TYPE_CHECKING``)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.dump(node.test):
            for stmt in node.body:
                out.update(id(x) for x in ast.walk(stmt))
    return out


def _imported(node: ast.Import | ast.ImportFrom, module: str, is_pkg: bool) -> Iterator[str]:
    if isinstance(node, ast.Import):
        yield from (a.name for a in node.names)
        return
    base = node.module or ""
    if node.level:  # relative: resolved against the importing module's package
        parts = module.split(".") if is_pkg else module.split(".")[:-1]
        parts = parts[: len(parts) - node.level + 1]
        base = ".".join([*parts, base] if base else parts)
    yield base
    yield from (f"{base}.{a.name}" for a in node.names)  # ``from pkg import submodule``


def module_graph(root: Path) -> tuple[dict[str, set[str]], dict[tuple[str, str], list[int]]]:
    """Module -> the package's modules it imports at run time, and the lines of each edge."""
    files = {".".join(p.relative_to(root.parent).with_suffix("").parts).removesuffix(
        ".__init__"): p for p in sorted(root.rglob("*.py"))}
    deps: dict[str, set[str]] = {m: set() for m in files}
    lines: dict[tuple[str, str], list[int]] = {}
    for mod, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        skip = _type_checking_nodes(tree)
        for node in ast.walk(tree):
            if id(node) in skip or not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            for name in _imported(node, mod, path.name == "__init__.py"):
                while name and name not in files:
                    name = name.rpartition(".")[0]
                if name and name != mod:
                    deps[mod].add(name)
                    lines.setdefault((mod, name), []).append(node.lineno)
    return deps, lines


def cycles(deps: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module, largest first."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for start in sorted(deps):  # iterative Tarjan (no recursion limit on deep chains)
        if start in index:
            continue
        work = [(start, iter(sorted(deps[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(deps[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    x = stack.pop()
                    on.discard(x)
                    comp.append(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return sorted(out, key=len, reverse=True)


def main(argv: list[str]) -> int:
    root = Path(argv[0] if argv else "bench")
    deps, lines = module_graph(root)
    found = cycles(deps)
    if not found:
        print(f"no import cycles ({len(deps)} modules of {root})")
        return 0
    for comp in found:
        members = set(comp)
        print(f"cycle of {len(comp)} modules:")
        for (a, b), ls in sorted(lines.items()):
            if a in members and b in members:
                print(f"  {a} -> {b}  (line {', '.join(map(str, sorted(set(ls))))})")
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
