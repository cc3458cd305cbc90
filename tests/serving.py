"""`omni-edge-run serve` on a plan for the length of a test module: started on a free port, its
listening line read, stopped by SIGTERM (which must end it with exit code 0)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import openai
from paths import RUN


@contextmanager
def serving(plan: Path, *flags: str, api_key: str = "secret") -> Iterator[dict[str, Any]]:
    """{"url", "model", "plan", "proc", "key"} of a server on `plan` (one session, one thread unless `flags` say)."""
    proc = subprocess.Popen([str(RUN), "serve", "--plan", str(plan), "--port", "0", "--threads", "1", *flags],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "OMNI_EDGE_API_KEY": api_key})
    assert proc.stdout is not None
    first = proc.stdout.readline()
    assert first, proc.stderr.read() if proc.stderr else ""
    try:
        yield {**json.loads(first), "plan": plan, "proc": proc, "key": api_key}
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0


def client(server: dict[str, Any], key: str | None = None) -> openai.OpenAI:
    """The official client on the server, without retries (a 429 must surface at once)."""
    return openai.OpenAI(base_url=server["url"], api_key=key or server["key"], max_retries=0, timeout=120)
