"""Text available offline for training tiny tokenizers and checkpoints: the docstrings of a
fixed list of Python standard-library modules (deterministic for a given Python version),
plus a few lines of multilingual text so the tokenizer sees CJK, accents and emoji."""

from __future__ import annotations

import importlib
import inspect
import re

STDLIB_MODULES = (
    "abc", "argparse", "asyncio", "base64", "bisect", "calendar", "collections", "contextlib", "csv", "dataclasses",
    "datetime", "decimal", "difflib", "email", "enum", "fractions", "functools", "gzip", "hashlib", "heapq", "html",
    "http.client", "inspect", "io", "itertools", "json", "logging", "mailbox", "math", "operator", "os", "pathlib",
    "pickle", "pprint", "queue", "random", "re", "shlex", "shutil", "socket", "sqlite3", "statistics", "string",
    "subprocess", "tarfile", "tempfile", "textwrap", "threading", "timeit", "tokenize", "turtle", "typing",
    "unittest", "urllib.parse", "uuid", "warnings", "weakref", "xml.dom", "zipfile",
)

MULTILINGUAL = (
    "The quick brown fox jumps over the lazy dog. Über den Wolken muss die Freiheit wohl grenzenlos sein.",
    "Voix ambiguë d'un cœur qui, au zéphyr, préfère les jattes de kiwis. ¿Dónde está la biblioteca?",
    "天地玄黄，宇宙洪荒。日月盈昃，辰宿列张。我们今天学习自然语言处理。",
    "東京は日本の首都です。ひらがなとカタカナと漢字。 한국어 문장도 조금 있습니다.",
    "Emoji: 😀 🚀 ✨ 👍🏽 🇯🇵 — numbers 0123456789, 3.14159, 2026-12-02, $42.50, 100%.",
    "Tabs\tand  double  spaces,\nnew lines\r\nand trailing spaces   \n\n",
)


def _clean(text: str) -> str:
    return re.sub(r"[ \t]+\n", "\n", inspect.cleandoc(text)).strip()


def stdlib_corpus() -> list[str]:
    """Paragraph-sized documents, in a fixed order."""
    docs: list[str] = []
    for name in STDLIB_MODULES:
        try:
            module = importlib.import_module(name)
        except Exception:
            continue
        if module.__doc__:
            docs.append(_clean(module.__doc__))
        for attr in sorted(dir(module)):
            obj = getattr(module, attr, None)
            doc = getattr(obj, "__doc__", None)
            if attr.startswith("_") or not isinstance(doc, str) or len(doc) < 80:
                continue
            if getattr(obj, "__module__", name) != name:
                continue
            docs.append(_clean(doc))
    return docs + list(MULTILINGUAL)
