"""The packages form layers: no module imports from a layer above its own, and no two packages import each other.

The layers, bottom to top (docs/architecture.md draws them). A package may import from its own layer's
other packages, as long as no circle forms, and from any layer below.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "productcrawler"

LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"items", "signals", "meta", "stat_keys", "instruments", "instance", "per_crawler", "redis_connection",
               "redis_clock", "redis_lua", "redis_keys"}),
    frozenset({"answer", "ids", "listing"}),
    frozenset({"config"}),
    frozenset({"storage", "download"}),
    frozenset({"passes", "ratelimit", "budget", "retry", "proxies", "guard", "monitoring"}),
    frozenset({"spiders", "run"}),
    frozenset({"commands", "settings"}),
)

def _layer(package: str) -> int:
    for number, packages in enumerate(LAYERS):
        if package in packages:
            return number
    raise AssertionError(f"productcrawler.{package} has no layer: add it to LAYERS")


def _package_of(path: Path) -> str:
    """The top-level package (or module) of productcrawler that a source file belongs to."""
    return path.relative_to(PACKAGE).parts[0].removesuffix(".py")


def _imported_packages(path: Path) -> list[tuple[int, str]]:
    """(line, top-level package) for each productcrawler import of a module, type-only ones included."""
    found = []
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = parts[:len(parts) - node.level]
                module = ".".join(base + ((node.module,) if node.module else ()))
            else:
                module = node.module or ""
            names = [module] if node.module or not node.level else [f"{module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        for name in names:
            dotted = name.split(".")
            if dotted[0] == "productcrawler" and len(dotted) > 1:
                found.append((node.lineno, dotted[1]))
    return found


def import_graph() -> dict[str, dict[str, list[str]]]:
    """package -> imported package -> where ("path:line"), between different packages only."""
    graph: dict[str, dict[str, list[str]]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.parent == PACKAGE and path.name == "__init__.py":
            continue
        package = _package_of(path)
        for line, imported in _imported_packages(path):
            if imported != package:
                graph.setdefault(package, {}).setdefault(imported, []).append(
                    f"{path.relative_to(PACKAGE.parent)}:{line}")
    return graph


def upward_imports(graph: dict[str, dict[str, list[str]]]) -> list[str]:
    return [f"{where} {package} -> {imported}"
            for package, targets in sorted(graph.items())
            for imported, places in sorted(targets.items()) if _layer(imported) > _layer(package)
            for where in places]


def package_cycles(graph: dict[str, dict[str, list[str]]]) -> list[list[str]]:
    """The strongly connected components of more than one package (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for successor in graph.get(node, {}):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(cycles)


def test_every_package_has_a_layer():
    for path in PACKAGE.rglob("*.py"):
        if not (path.parent == PACKAGE and path.name == "__init__.py"):
            _layer(_package_of(path))


def test_no_module_imports_from_a_layer_above_its_own():
    assert upward_imports(import_graph()) == []


def test_no_two_packages_import_each_other_even_through_others():
    assert package_cycles(import_graph()) == []


if __name__ == "__main__":
    graph = import_graph()
    print("\n".join(upward_imports(graph)))
    print("upward imports:", len(upward_imports(graph)))
    print("package cycles:", package_cycles(graph))
