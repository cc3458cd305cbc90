"""`omni-edge run|speak --device D`: the same request, run by the device's own omni-edge-run.

The plan and its artifacts are deployed with the runtime built for the device's ABI (a bundle
from `omni-edge bundle`, or this host's build for `host`), the target's binary streams its JSON
lines (or text) back as it prints them, and `speak` pulls the WAV back to --out.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import PurePosixPath
from typing import Any

from omni_edge.files import atomic_output
from omni_edge.harness.deploy.deploy import deploy, runtime_from_dir
from omni_edge.harness.devices import DeviceError, open_device
from omni_edge.interrupt import GUARD


def _flag(name: str, value: Any) -> list[str]:
    if value is None or value is False:
        return []
    return [name] if value is True else [name, str(value)]


def native_arguments(args: argparse.Namespace, command: str) -> list[str]:
    """The omni-edge-run options that say what the CLI's options say (one request)."""
    out: list[str] = []
    for name in ("temperature", "top_k", "top_p", "min_p", "repetition_penalty", "seed", "threads"):
        value = getattr(args, name, None)
        out += _flag("--" + name.replace("_", "-"), value if name != "threads" or value else None)
    out += _flag("--json", args.json) + _flag("--allow-unqualified", args.allow_unqualified) + _flag("--info", args.info)
    if command == "speak":
        text_ids = ",".join(map(str, args.text_ids or ()))
        return out + (["--text-ids", text_ids] if text_ids else ["--text", args.text or ""]) + _flag(
            "--max-frames", args.max_frames or None) + _flag(
            "--prebuffer-ms", int(args.prebuffer_ms) if args.prebuffer_ms >= 0 else None)  # -1: the plan's
    if args.prompt_ids:
        out += ["--prompt-ids", ",".join(map(str, args.prompt_ids))]
    else:  # the CLI read and checked a prompt file already: args.prompt holds its text
        out += ["--prompt", args.prompt]
    out += _flag("--chat", args.chat) + _flag("--system", args.system) + _flag("--max-new-tokens", args.max_new_tokens)
    for stop in args.stop or ():
        out += ["--stop", stop]
    return out + _flag("--ignore-stop-tokens", args.ignore_stop_tokens)


class RemoteProcess:
    """What a signal cancels during `--device`: the device's omni-edge-run, sent SIGTERM, which
    ends its streams with their terminal events (streamed back like every other line)."""

    def __init__(self, device: Any) -> None:
        self.device, self.pid = device, 0

    def started(self, pid: int) -> None:
        self.pid = pid
        if GUARD.cancelled:  # the signal came while deploying
            self.cancel()

    def cancel(self) -> None:
        if self.pid:
            self.device.kill(self.pid)


def run_on_device(args: argparse.Namespace, command: str) -> int:
    """Deploys the plan to args.device and runs `command` (run or speak) there; returns its exit code."""
    if command == "run" and getattr(args, "speak", None) is not None:
        print("omni-edge run: --speak with --device is not supported; use speak --device with a speech plan",
              file=sys.stderr)
        return 2
    try:
        device = open_device(args.device, adb_host=args.adb_host, adb_port=args.adb_port, workdir=args.workdir)
        runtime = runtime_from_dir(args.runtime) if args.runtime is not None else None
        deployment = deploy(device, args.plan.parent, plan_name=args.plan.name, runtime=runtime)
        argv = [deployment.binary, command, "--plan", deployment.plan, *native_arguments(args, command)]
        remote_wav = str(PurePosixPath(deployment.root) / "out" / "reply.wav")
        if command == "speak":
            device.shell(["mkdir", "-p", str(PurePosixPath(remote_wav).parent)])
            argv += ["--out", remote_wav]
        print(f"[{device.serial}] {deployment.binary} ({deployment.report.bytes_sent} bytes pushed)", file=sys.stderr)
        remote = RemoteProcess(device)
        result = GUARD.run(remote, lambda: device.stream(argv, lambda line: print(line, flush=True), env=deployment.env,
                                                         on_start=remote.started))
        if result.stderr:
            sys.stderr.write(result.stderr if result.stderr.endswith("\n") else result.stderr + "\n")
        if command == "speak" and result.returncode == 0:
            with atomic_output(args.out) as part:
                device.pull(remote_wav, part)
    except (DeviceError, OSError, ValueError) as exc:
        if args.json:  # the stream still ends with one terminal event
            print(json.dumps({"kind": "error", "finish_reason": "error", "seq": 0, "reason": "device", "error": str(exc)}))
        print(f"omni-edge {command}: {exc}", file=sys.stderr)
        return 1
    if GUARD.cancelled:
        return GUARD.exit_code
    if result.timed_out:
        print(f"omni-edge {command}: timed out on {args.device}", file=sys.stderr)
        return 124
    return result.returncode if result.returncode is not None else 1
