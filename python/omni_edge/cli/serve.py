"""`omni-edge serve`: a plan behind the OpenAI (chat completions, audio speech) and OpenPI
protocols, served by the native controller's server (`omni-edge-run serve`) here, or on a
device (--device) with its port forwarded to this host."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from omni_edge.cli import flags


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("serve", help="serve a plan over HTTP (OpenAI, OpenPI) from the native controller")
    p.add_argument("--plan", type=Path, required=True)
    p.add_argument("--host", default="127.0.0.1", help="the address to listen on (default: loopback only)")
    p.add_argument("--port", type=flags.whole(0, 65535), default=8000, help="0: any free port (printed)")
    p.add_argument("--model", default=None, help="the model id clients name (default: the plan's directory name)")
    p.add_argument("--api-key", default=os.environ.get("OMNI_EDGE_API_KEY"),
                   help="asked as Authorization: Bearer KEY (default: $OMNI_EDGE_API_KEY; none: open)")
    p.add_argument("--max-sessions", type=flags.whole(1, 64), default=1,
                   help="sessions opened at start; a request beyond them is answered 429")
    p.add_argument("--max-body-mb", type=flags.whole(1, 1024), default=32)
    p.add_argument("--max-connections", type=flags.whole(1, 4096), default=32,
                   help="connections open at once (a thread each); one beyond is answered 429")
    p.add_argument("--threads", type=flags.whole(0, 1024), default=0, help="per session (0: all cores)")
    p.add_argument("--allow-unqualified", action="store_true", help="load artifacts whose reports did not pass")
    flags.device(p, required=False)
    flags.runtime(p)
    p.add_argument("--device-port", type=flags.whole(0, 65535), default=0,
                   help="with --device: the port on the device (0: any free one); this host gets a forward to it")
    p.set_defaults(func=serve)


def serve(args: argparse.Namespace) -> int:
    if args.device is not None:
        from omni_edge.harness.deploy.remote_serve import serve_on_device

        return serve_on_device(args)
    from omni_edge.harness.deploy.deploy import installed_binary
    from omni_edge.harness.deploy.remote_serve import serve_arguments
    from omni_edge.harness.devices import DeviceError

    try:
        binary = str(installed_binary())
    except DeviceError as exc:
        print(f"omni-edge serve: {exc}", file=sys.stderr)
        return 1
    argv = [binary, "serve", "--plan", str(args.plan), "--host", args.host, "--port", str(args.port),
            *serve_arguments(args)]
    if args.api_key:
        os.environ["OMNI_EDGE_API_KEY"] = args.api_key  # by environment: not in the process list
    sys.stdout.flush()
    os.execv(binary, argv)  # the native server owns the process: its signals, its exit code
