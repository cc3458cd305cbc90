#!/usr/bin/env python3
"""The structural rules of the Python package (python/omni_edge), checked by scripts/lint.sh as
scripts/check_native.py checks controller_cpp/:

1. Layers: a module imports only its own layer and the layers below it
       base (files, interrupt, socs, source_tree) -> contracts -> artifacts -> runtime -> export, harness -> cli
   (export and harness are side by side: neither imports the other). Lazy imports count.
2. Inside export: the shared layers (export/*.py, targets/, decoder/) never import a model
   family (models/<arch>/); a family never imports another family; only registry.py lists them.
3. No function of MAX_LINES lines or more (signature to last line), outside tests.

Usage: scripts/check_python.py [--report]   (--report lists the longest functions)
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "python" / "omni_edge"
MAX_LINES = 80  # a function must be shorter than this
BASE = {"omni_edge", "omni_edge._native", "omni_edge.files", "omni_edge.interrupt", "omni_edge.socs",
        "omni_edge.source_tree"}
LAYERS = ["base", "contracts", "artifacts", "runtime", "export|harness", "cli"]
# Python files outside the package whose functions are held to the same length.
LENGTH_ONLY = ("scripts", "benchmarks")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(name: str) -> bool:
    path = PACKAGE.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def layer_of(module: str) -> int:
    if module in BASE:
        return 0
    top = module.split(".")[1]
    for rank, names in enumerate(LAYERS):
        if top in names.split("|"):
            return rank
    raise ValueError(f"{module}: in no layer of scripts/check_python.py (add it to LAYERS or BASE)")


def imports(tree: ast.AST, module: str) -> list[tuple[int, str]]:
    """(line, imported module) for every omni_edge import, relative ones resolved."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "omni_edge"]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(module.split(".")[:-node.level] + ([base] if base else []))
            if base.split(".")[0] != "omni_edge":
                continue
            # `from omni_edge.export.models import pi0` imports the submodule pi0.
            out += [(node.lineno, f"{base}.{a.name}" if is_module(f"{base}.{a.name}") else base) for a in node.names]
    return out


def family_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[3] if parts[:3] == ["omni_edge", "export", "models"] and len(parts) > 3 else None


def import_problems(path: Path, tree: ast.AST) -> list[str]:
    module = module_name(path)
    mine, problems = layer_of(module), []
    for line, target in imports(tree, module):
        if target == "omni_edge.__version__" or target.startswith("omni_edge._native"):
            continue
        theirs = layer_of(target)
        where = f"{path.relative_to(ROOT)}:{line}: imports {target}"
        if theirs > mine or (theirs == mine and module.split(".")[1:2] != target.split(".")[1:2] and theirs != 0):
            problems.append(f"{where} ({LAYERS[mine]} may import only {', '.join(LAYERS[:mine + 1])})")
        family, other = family_of(module), family_of(target)
        shared = (module == "omni_edge.export" or module.startswith("omni_edge.export.")) and \
            module != "omni_edge.export.registry"
        if other is not None and family is None and shared:
            problems.append(f"{where}: a shared layer never imports a model family (what two families share "
                            "moves down to export/, decoder/ or targets/)")
        if other is not None and family is not None and other != family:
            problems.append(f"{where}: a family never imports another family")
    return problems


def functions(tree: ast.AST) -> list[tuple[int, int, str]]:
    """(length, first line, name) of every function, nested ones included."""
    return [(node.end_lineno - node.lineno + 1, node.lineno, node.name) for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno is not None]


def main() -> int:
    problems: list[str] = []
    found: list[tuple[int, str, str]] = []
    files = sorted(PACKAGE.rglob("*.py")) + sorted(p for d in LENGTH_ONLY for p in (ROOT / d).rglob("*.py"))
    for path in files:
        tree = ast.parse(path.read_text(), str(path))
        if path.is_relative_to(PACKAGE):
            problems += import_problems(path, tree)
        found += [(n, f"{path.relative_to(ROOT)}:{line}", name) for n, line, name in functions(tree)]
    found.sort(reverse=True)
    problems += [f"{where}: {name} is {n} lines (fewer than {MAX_LINES})" for n, where, name in found if n >= MAX_LINES]
    if "--report" in sys.argv:
        for n, where, name in found[:15]:
            print(f"{n:4d}  {where}  {name}")
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
