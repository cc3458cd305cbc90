#!/usr/bin/env python3
"""Three structural rules of the native code (controller_cpp/ and the Python extension in
pybind/), checked by scripts/lint.sh:

1. Layers: a folder includes only the folders below it (base -> contract -> runtime -> text,
   decoding -> pipeline -> families -> capi -> tools), backends only base/contract/runtime, and a
   family folder never includes another family's (families/builtin.* registers them all).
   pybind/ is a front end over all of controller_cpp/ and may include any of it.
2. No function is longer than MAX_LINES lines (signature to closing brace), `extern "C"`
   functions and macro-defined entry points such as NB_MODULE(...) { ... } included.
3. One platform layer: only base/platform/ includes an OS header or tests for an OS
   (the public C header may pick its export attribute).

Usage: scripts/check_native.py [--report]   (--report lists the longest functions)
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ROOT = REPO / "controller_cpp"
PYBIND = REPO / "pybind"  # checked as if it were one more folder of controller_cpp/, named pybind
MAX_LINES = 80
LAYERS = {
    "base": {"base"},
    "contract": {"base", "contract"},
    "runtime": {"base", "contract", "runtime"},
    "text": {"base", "text"},
    "media": {"base", "media"},  # images and audio as encoders read them
    "decoding": {"base", "contract", "runtime", "text", "decoding"},
    "pipeline": {"base", "contract", "runtime", "text", "decoding", "pipeline"},
    "backends": {"base", "contract", "runtime", "backends"},
    "families": {"base", "contract", "runtime", "text", "media", "decoding", "pipeline", "families"},
    # realtime voice sessions: voice activity, turns, and the conversation over a plan's session
    "realtime": {"base", "contract", "runtime", "text", "media", "decoding", "pipeline", "realtime"},
    "capi": {"base", "contract", "runtime", "text", "decoding", "pipeline", "families", "realtime", "capi"},
    "tools": {"base", "capi", "server", "tools"},
    "jni": {"capi", "jni"},  # the JNI bridge: a client of the C ABI only
    "server": {"base", "capi", "server"},  # the network protocols: a client of the C ABI
    "fuzz": {"base", "contract", "runtime", "text", "media", "decoding", "pipeline", "families", "realtime", "server",
             "fuzz"},
}
LAYERS["pybind"] = set(LAYERS) | {"pybind"}  # the Python extension: a front end over all of it
INCLUDE = re.compile(r'^\s*#include\s+"([^"]+)"', re.M)
OS_SPECIFIC = re.compile(r"^\s*#\s*include\s*<(unistd|dlfcn|fcntl|signal|malloc|windows|io|direct|pthread)\.h>|"
                         r"^\s*#\s*include\s*<sys/|^\s*#\s*if.*\b(_WIN32|_WIN64|__linux__|__ANDROID__|__APPLE__)\b", re.M)
OS_EXEMPT = {"capi/omni_edge.h"}
HEADER = re.compile(r"\)\s*(const)?\s*(override|final|noexcept)?\s*(->\s*[\w:<>, *&]+)?\s*$")
# `extern "C" {` never reaches this (no ")" before its brace); `extern "C" int f(...) {` is a function.
NOT_FUNCTION = re.compile(r"^\s*(if|for|while|switch|catch|do|else|try)\b|\b(namespace|struct|class|enum|union)\b")


def sources() -> list[tuple[Path, Path]]:
    """(path, name) of every native source: controller_cpp/<folder>/... as <folder>/..., pybind/... as is."""
    found = [(path, path.relative_to(ROOT)) for path in sorted(ROOT.rglob("*"))]
    found += [(path, path.relative_to(REPO)) for path in sorted(PYBIND.rglob("*"))]
    return [(path, rel) for path, rel in found if path.suffix in (".h", ".cc")]


def layer_problems() -> list[str]:
    problems = []
    for path, rel in sources():
        if path.name.endswith("_test.cc"):
            continue
        folder = rel.parts[0]
        allowed = LAYERS.get(folder)
        for include in INCLUDE.findall(path.read_text()):
            top = include.split("/")[0]
            if top not in LAYERS:
                continue  # third-party ("onnxruntime_c_api.h", "nlohmann/...")
            if allowed is not None and top not in allowed:
                problems.append(f"{rel}: includes {include} ({folder} may include {', '.join(sorted(allowed))})")
            if folder == "families" and top == "families" and not rel.name.startswith("builtin"):
                mine, theirs = rel.parts[1], include.split("/")[1]
                if theirs != mine:
                    problems.append(f"{rel}: includes {include}: a family never includes another family")
    return problems


def platform_problems() -> list[str]:
    problems = []
    for path, rel in sources():
        if rel.parts[:2] == ("base", "platform") or rel.as_posix() in OS_EXEMPT:
            continue
        for match in OS_SPECIFIC.finditer(path.read_text()):
            problems.append(f"{rel}: '{match.group(0).strip()}': OS-specific code lives in base/platform/")
    return problems


def strip(line: str) -> str:
    """The line without string/char literals and // comments (enough to count braces)."""
    line = re.sub(r'"(\\.|[^"\\])*"', '""', line)
    line = re.sub(r"'(\\.|[^'\\])*'", "''", line)
    return line.split("//", 1)[0]


def functions(path: Path) -> list[tuple[int, int, str]]:
    """(length, first line, signature) of every function body in the file."""
    out, stack, header = [], [], ""
    in_comment = False
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = strip(raw)
        if in_comment:
            if "*/" not in line:
                continue
            line, in_comment = line.split("*/", 1)[1], False
        if "/*" in line and "*/" not in line.split("/*", 1)[1]:
            line, in_comment = line.split("/*", 1)[0], True
        if line.lstrip().startswith("#"):
            continue
        for ch in line:
            if ch == "{":
                text = " ".join(header.split())
                is_function = bool(HEADER.search(text)) and not NOT_FUNCTION.search(text) and not any(s[1] for s in stack)
                stack.append((number, is_function, text))
                header = ""
            elif ch == "}":
                if stack:
                    start, is_function, text = stack.pop()
                    if is_function:
                        out.append((number - start + 1, start, text[:90]))
                header = ""
            elif ch == ";" and header.count("(") <= header.count(")"):  # not the ";" of a for (...)
                header = ""
            else:
                header += ch
        header += " "
    return out


def main() -> int:
    problems = layer_problems() + platform_problems()
    found = []
    for path, rel in sources():
        if "unicode_tables" not in path.name:
            found += [(n, f"{rel}:{line}", sig) for n, line, sig in functions(path)]
    found.sort(reverse=True)
    problems += [f"{where}: a function of {n} lines (at most {MAX_LINES}): {sig}" for n, where, sig in found if n > MAX_LINES]
    if "--report" in sys.argv:
        for n, where, sig in found[:15]:
            print(f"{n:4d}  {where}  {sig}")
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
