"""The voice page (GET /voice) in headless Chromium (Debian's) with a fake microphone playing
espeak-ng speech from a file: the page streams it to /v1/realtime, the server's VAD finds the
turn, and the reply's transcript appears while its audio plays; the microphone then speaks over
the reply, the page stops playing it, and the reply is cut back to what the page acknowledged
playing (the cut part of its transcript struck through) before the second turn is answered.
Driven and read over the DevTools protocol (websockets); a screenshot is kept beside the test's
output."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from omni_edge.harness.profiling.spoken import spoken
from serving import serving

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (scripts/install_system_deps.sh)")


@pytest.fixture(scope="module")
def page_server(voice_plan: Path) -> Iterator[dict[str, Any]]:
    with serving(voice_plan) as running:
        yield running


class DevTools:
    """One page of a headless Chromium, over its DevTools websocket."""

    def __init__(self, port: int) -> None:
        from websockets.sync.client import connect

        pages = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/json", timeout=10).read())
        page = next(p for p in pages if p["type"] == "page")
        self.ws = connect(page["webSocketDebuggerUrl"], max_size=None)
        self.next_id = 0

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            reply = json.loads(self.ws.recv(timeout=60))
            if reply.get("id") == self.next_id:
                return dict(reply.get("result", {}))

    def eval(self, expression: str) -> Any:
        return self.call("Runtime.evaluate", expression=expression, returnByValue=True)["result"].get("value")


def test_the_page_hears_the_microphone_and_speaks_the_reply(page_server: dict[str, Any], tmp_path: Path) -> None:
    mic = spoken([0.6, "What is the capital of France?", 1.6, "Wait, stop.", 2.5]).write_wav(tmp_path / "mic.wav")
    base = page_server["url"].removesuffix("/v1")
    html = urllib.request.urlopen(base + "/voice", timeout=10).read().decode()
    assert "omni-edge voice" in html  # served without a key: the page holds no data
    proc = subprocess.Popen([str(CHROMIUM), "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                             "--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream",
                             f"--use-file-for-fake-audio-capture={mic}%noloop", "--autoplay-policy=no-user-gesture-required",
                             "--remote-debugging-port=0", "--window-size=1100,640", f"--user-data-dir={tmp_path / 'profile'}",
                             f"{base}/voice?autostart=1&key={page_server['key']}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        port = None
        for line in proc.stderr:
            if match := re.search(r"DevTools listening on ws://127\.0\.0\.1:(\d+)/", line):
                port = int(match.group(1))
                break
        assert port is not None, "chromium did not start"
        page = DevTools(port)
        deadline = time.monotonic() + 120
        while int(page.eval("document.body.dataset.responses || '0'") or "0") < 2:
            assert time.monotonic() < deadline, page.eval("document.getElementById('log').innerText + ' / ' + "
                                                          "document.getElementById('state').innerText")
            time.sleep(0.5)
        log = page.eval("document.getElementById('log').innerText")
        assert log.count("(spoken turn)") == 2 and "ASSISTANT" in log.upper(), log
        cut = page.eval("(document.querySelector('.assistant .cut') || {}).textContent")
        assert cut, f"the first reply was not cut back: {log}"  # what was never played, struck through
        played = page.eval("document.getElementById('m-played').textContent")
        assert played.endswith(" ms") and int(played.split()[0]) > 0, played
        v2v = page.eval("document.getElementById('m-v2v').textContent")
        assert v2v.endswith(" ms"), v2v
        shot = page.call("Page.captureScreenshot", format="png")["data"]
        import base64

        (tmp_path / "voice_page.png").write_bytes(base64.b64decode(shot))
    finally:
        proc.terminate()
        proc.wait(timeout=30)
