"""Crash-safe output: a file the CLIs write appears whole or not at all. It is written to a
temporary file beside its target (same file system), flushed to disk, then renamed over the
target; an exception (or a kill) before the rename leaves the target as it was. And untrusted
names (a fixture's, an observation's) resolved only inside their directory."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any


@contextlib.contextmanager
def atomic_output(target: Path) -> Iterator[Path]:
    """Yields the temporary path to write; renames it to `target` when the block succeeds."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    os.close(fd)
    part = Path(name)
    try:
        yield part
        with open(part, "rb+") as f:
            os.fsync(f.fileno())
        os.chmod(part, 0o644)  # mkstemp's 0600 would make the output private
        os.replace(part, target)
    finally:
        part.unlink(missing_ok=True)


def write_text_atomic(target: Path, text: str) -> None:
    with atomic_output(target) as part:
        part.write_text(text)


def write_bytes_atomic(target: Path, data: bytes) -> None:
    with atomic_output(target) as part:
        part.write_bytes(data)


def inside(directory: Path, name: Any, follow: bool = True) -> Path:
    """`directory / name` for a name from untrusted input, or a ValueError: a name that is
    absolute, climbs out with '..', or leads out through a symlink is refused (with follow=False
    the name itself may be a link: its directory must stay inside)."""
    parts = PurePosixPath(name).parts if isinstance(name, str) else ()
    if not parts or PurePosixPath(name).is_absolute() or "\\" in name or "\0" in name:
        raise ValueError(f"{name!r}: a path relative to its directory is expected")
    if ".." in parts:
        raise ValueError(f"{name!r} leaves its directory ('..')")
    path = directory / str(name)
    resolved = path.resolve() if follow else path.parent.resolve() / path.name
    if not resolved.is_relative_to(directory.resolve()):
        raise ValueError(f"{name!r}: leads outside its directory")
    return path
