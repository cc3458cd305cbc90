"""`omni-edge serve --device D`: the plan served by the device's own omni-edge-run, reached from
this host through a port forward (ADB `forward` for a phone; the host and qemu devices share
this machine's loopback).

The plan and the runtime are deployed as for `run --device`; the server's listening line comes
back with the URL this host reaches it at (and the device's own as `device_url`); a signal stops
the remote server with SIGTERM (it ends its streams) and the forward is removed.
"""

from __future__ import annotations

import argparse
import json
import queue
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from omni_edge.harness.deploy.deploy import Deployment, deploy, runtime_from_dir
from omni_edge.harness.deploy.remote_run import RemoteProcess
from omni_edge.harness.devices import DeviceError, open_device
from omni_edge.interrupt import GUARD

SERVE_FOREVER_S = 10 * 365 * 24 * 3600.0  # a server runs until stopped, not to a timeout


def serve_arguments(args: argparse.Namespace) -> list[str]:
    """The omni-edge-run serve options the CLI's say (the key goes by environment, not argv)."""
    out = ["--max-sessions", str(args.max_sessions), "--max-body-mb", str(args.max_body_mb),
           "--max-connections", str(args.max_connections)]
    out += ["--model", args.model] if args.model else []
    out += ["--threads", str(args.threads)] if args.threads else []
    return out + (["--allow-unqualified"] if args.allow_unqualified else [])


def _port_of(url: str) -> int:
    return int(url.split("://", 1)[1].split("/", 1)[0].rsplit(":", 1)[1])


@dataclass
class RemoteServer:
    """A deployment's server, running: this host's base URL to it, its model id, its pid there."""

    url: str
    model: str
    pid: int


@contextmanager
def remote_server(deployment: Deployment, flags: list[str], start_timeout_s: float = 600.0) -> Iterator[RemoteServer]:
    """The deployment's `omni-edge-run serve` on the device's loopback (any free port), forwarded
    to this host, for the length of the block; then stopped with SIGTERM (it ends its streams and
    exits 0, else DeviceError) and the forward removed."""
    device = deployment.device
    listening: queue.Queue[dict[str, Any]] = queue.Queue()
    pid: list[int] = []
    result: list[Any] = []

    def on_line(line: str) -> None:
        event: Any = json.loads(line) if line.startswith("{") else None
        if isinstance(event, dict) and event.get("kind") == "listening":
            listening.put(event)

    def run() -> None:
        argv = [deployment.binary, "serve", "--plan", deployment.plan, "--host", "127.0.0.1", "--port", "0", *flags]
        try:
            result.append(device.stream(argv, on_line, timeout=SERVE_FOREVER_S, env=deployment.env, on_start=pid.append))
        except Exception as exc:  # any failure is the start's answer, not a 10-minute wait
            result.append(exc)
        finally:
            listening.put({})  # ended: wakes a start still waiting

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    local: int | None = None
    try:  # whatever happens from here (a failed forward, a signal, the block raising), the server stops
        try:
            event = listening.get(timeout=start_timeout_s)  # the listening line, or {} when the server ended
        except queue.Empty:
            event = {}
        if not event:
            ended = result[0] if result else None
            why = ended if isinstance(ended, Exception) else getattr(ended, "stderr", "") or "no listening line in time"
            raise DeviceError(f"{device.serial}: omni-edge-run serve did not start: {str(why).strip()[-800:]}")
        local = device.forward(_port_of(event["url"]))
        yield RemoteServer(url=f"http://127.0.0.1:{local}/v1", model=str(event["model"]), pid=pid[0])
    finally:
        if pid:
            device.kill(pid[0])  # SIGTERM: it ends its streams and exits 0
        thread.join(timeout=120)
        if pid and thread.is_alive():
            device.kill(pid[0], hard=True)
            thread.join(timeout=30)
        if local is not None:
            device.remove_forward(local)
    ended = result[0] if result else None
    if isinstance(ended, Exception):
        raise ended if isinstance(ended, DeviceError) else DeviceError(f"{device.serial}: omni-edge-run serve: {ended}")
    if ended is None or ended.returncode != 0:
        raise DeviceError(f"{device.serial}: omni-edge-run serve exited "
                          f"{getattr(ended, 'returncode', None)}: {getattr(ended, 'stderr', '').strip()[-800:]}")


def serve_on_device(args: argparse.Namespace) -> int:
    """Deploys the plan to args.device, serves it there on loopback, forwards the port here."""
    forwarded: list[int] = []
    try:
        device = open_device(args.device, adb_host=args.adb_host, adb_port=args.adb_port, workdir=args.workdir)
        runtime = runtime_from_dir(args.runtime) if args.runtime is not None else None
        deployment = deploy(device, args.plan.parent, plan_name=args.plan.name, runtime=runtime)
        argv = [deployment.binary, "serve", "--plan", deployment.plan, "--host", "127.0.0.1", "--port",
                str(args.device_port), *serve_arguments(args)]
        env = {**deployment.env, **({"OMNI_EDGE_API_KEY": args.api_key} if args.api_key else {})}

        def on_line(line: str) -> None:
            event: Any = json.loads(line) if line.startswith("{") else None
            if isinstance(event, dict) and event.get("kind") == "listening":
                local = device.forward(_port_of(event["url"]))
                forwarded.append(local)
                event = {**event, "url": f"http://127.0.0.1:{local}/v1", "device": device.serial,
                         "device_url": event["url"]}
                line = json.dumps(event)
            print(line, flush=True)

        print(f"[{device.serial}] {deployment.binary} serve ({deployment.report.bytes_sent} bytes pushed)", file=sys.stderr)
        remote = RemoteProcess(device)
        result = GUARD.run(remote, lambda: device.stream(argv, on_line, timeout=SERVE_FOREVER_S, env=env,
                                                         on_start=remote.started))
        if result.stderr:
            sys.stderr.write(result.stderr if result.stderr.endswith("\n") else result.stderr + "\n")
    except (DeviceError, OSError, ValueError) as exc:
        print(f"omni-edge serve: {exc}", file=sys.stderr)
        return 1
    finally:
        for local in forwarded:
            try:
                device.remove_forward(local)
            except DeviceError as exc:
                print(f"omni-edge serve: {exc}", file=sys.stderr)
    if GUARD.cancelled:
        return 0  # stopped as a server is: its streams ended, then it exited
    return result.returncode if result.returncode is not None else 1
