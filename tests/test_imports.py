"""No module of the package imports another from inside a function: such an import hides a cycle."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "productcrawler"


def _imports_in_functions(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for function in ast.walk(tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(function):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("productcrawler")):
                found.append((node.lineno, node.module or "."))
            elif isinstance(node, ast.Import):
                found += [(node.lineno, alias.name) for alias in node.names if alias.name.startswith("productcrawler")]
    return found


def test_no_module_imports_one_of_the_package_inside_a_function():
    found = {f"{path.relative_to(PACKAGE.parent)}:{line}": module
             for path in sorted(PACKAGE.rglob("*.py"))
             for line, module in _imports_in_functions(ast.parse(path.read_text(encoding="utf-8")))}
    assert found == {}
