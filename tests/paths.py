"""Where things are, for tests in any folder: the checkout, the committed data and fixtures, and
the two command lines setup.sh installs."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
DATA = TESTS / "data"
FIXTURES = TESTS / "fixtures"
CLI = ROOT / ".venv" / "bin" / "omni-edge"
RUN = ROOT / ".venv" / "bin" / "omni-edge-run"
