"""The OpenPI policy websocket through the official `openpi-client`: on the π0 plan of sizes no
preset has, `WebsocketClientPolicy.infer` returns the chunk `omni-edge-run act` gives for the same
observation and noise (camera arrays in, as a robot sends them: one HWC, one CHW); a stale
observation is refused (the client raises) and the connection serves on; vLLM-Omni's route and
reset; a second connection beside the one session is 429 at the upgrade."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import pytest
import websockets.exceptions
import websockets.sync.client
from openpi_client.websocket_client_policy import WebsocketClientPolicy
from pi0_unseen import CAMERAS, UNSEEN, act_reference, observation
from serving import serving


@pytest.fixture(scope="module")
def server(policy_plan: Path) -> Iterator[dict[str, Any]]:
    with serving(policy_plan) as running:
        yield running


def _address(server: dict[str, Any]) -> tuple[str, int]:
    host, port = server["url"].removeprefix("http://").removesuffix("/v1").split(":")
    return host, int(port)


def test_infer_equals_act_and_a_stale_observation_is_refused(server: dict[str, Any], scene: dict[str, Any],
                                                             tmp_path: Path) -> None:
    want = act_reference(server["plan"], scene, tmp_path)
    host, port = _address(server)
    policy = WebsocketClientPolicy(host=host, port=port, api_key=server["key"])
    metadata = policy.get_server_metadata()
    assert metadata["action_horizon"] == UNSEEN.chunk and metadata["policy"]["cameras"] == list(CAMERAS)
    got = policy.infer(observation(scene))
    assert got["actions"].dtype == np.float32 and np.array_equal(got["actions"], want)
    assert got["server_timing"]["infer_ms"] > 0
    with pytest.raises(RuntimeError, match="stale_observation"):
        policy.infer(observation(scene, age_ms=60_000))  # the plan's limit is 5 s
    with pytest.raises(RuntimeError, match="unknown: not read here"):
        policy.infer({**observation(scene), "unknown": 1})
    again = policy.infer(observation(scene))  # the connection serves on
    assert np.array_equal(again["actions"], want) and "prev_total_ms" in again["server_timing"]
    # One session: a second connection is refused at the upgrade, at once.
    with pytest.raises(websockets.exceptions.InvalidStatus) as busy:
        websockets.sync.client.connect(f"ws://{host}:{port}", additional_headers={"Authorization": "Api-Key secret"})
    assert busy.value.response.status_code == 429
    policy._ws.close()  # openpi-client has no close of its own: its connection, closed, frees the session


def _connect(uri: str) -> websockets.sync.client.ClientConnection:
    """A connection once the session is free (a connection closed a moment ago frees it when the
    server reads the close)."""
    deadline = time.monotonic() + 30
    while True:
        try:
            return websockets.sync.client.connect(uri, compression=None, additional_headers={"Authorization": "Bearer secret"})
        except websockets.exceptions.InvalidStatus as busy:
            assert busy.response.status_code == 429 and time.monotonic() < deadline
            time.sleep(0.05)


def test_vllm_omni_route_resets_and_a_wrong_key_is_refused(server: dict[str, Any]) -> None:
    host, port = _address(server)
    with pytest.raises(websockets.exceptions.InvalidStatus) as denied:
        websockets.sync.client.connect(f"ws://{host}:{port}/v1/realtime/robot/openpi",
                                       additional_headers={"Authorization": "Api-Key wrong"})
    assert denied.value.response.status_code == 401
    with _connect(f"ws://{host}:{port}/v1/realtime/robot/openpi") as ws:
        assert msgpack.unpackb(ws.recv())["action_dim"] == UNSEEN.action_dim
        ws.send(msgpack.packb({"endpoint": "reset"}))
        assert msgpack.unpackb(ws.recv()) == {"status": "reset successful"}
