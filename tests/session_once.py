"""Session fixtures made once per test run, also when pytest-xdist spreads the files over several
workers (scripts/test.sh: `-n 2 --dist loadfile`): the first worker that needs one makes it
under a file lock in the run's shared temporary directory, the others wait for it and read it.
A failed attempt leaves no marker, so the next worker to ask tries again (and fails the same
way, with its own error)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from filelock import FileLock


def made_once(factory: pytest.TempPathFactory, name: str, make: Callable[[Path], object]) -> Path:
    """ROOT/NAME as `make(ROOT/NAME)` creates it, made by one worker of the run. NAME may hold
    directories (its last part is kept: a checkpoint's directory name is its manifests' id)."""
    root = factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):  # each worker's base is a child of the run's
        root = root.parent
    out = root / "shared" / name
    done = out.with_name(out.name + ".done")
    out.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(out) + ".lock"):
        if not done.exists():
            shutil.rmtree(out, ignore_errors=True)  # what a failed attempt left
            make(out)
            done.touch()
    return out
