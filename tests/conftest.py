from __future__ import annotations

from pathlib import Path

import pytest
from omni_edge import implementations

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(params=["python", "native"])
def impl(request: pytest.FixtureRequest) -> implementations.Implementation:
    """The same test runs against the Python reference and the native controller."""
    return implementations.get(request.param)
