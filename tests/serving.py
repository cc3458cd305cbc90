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
def serving(plan: Path, *flags: str, api_key: str = "secret", binary: Path = RUN,
            env: dict[str, str] | None = None) -> Iterator[dict[str, Any]]:
    """{"url", "model", "plan", "proc", "key", "stderr"} of a server on `plan` (one session, one
    thread unless `flags` say); "stderr" holds what it wrote once it has stopped."""
    proc = subprocess.Popen([str(binary), "serve", "--plan", str(plan), "--port", "0", "--threads", "1", *flags],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {}), "OMNI_EDGE_API_KEY": api_key})
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    assert first, proc.stderr.read()
    running = {**json.loads(first), "plan": plan, "proc": proc, "key": api_key, "stderr": ""}
    try:
        yield running
    finally:
        proc.send_signal(signal.SIGTERM)
        _, running["stderr"] = proc.communicate(timeout=120)
        assert proc.returncode == 0, running["stderr"][-3000:]


def client(server: dict[str, Any], key: str | None = None) -> openai.OpenAI:
    """The official client on the server, without retries (a 429 must surface at once)."""
    return openai.OpenAI(base_url=server["url"], api_key=key or server["key"], max_retries=0, timeout=120)
