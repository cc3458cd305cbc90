"""The harness subcommands of `omni-edge`: devices, push, profile, budget, matrix."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from omni_edge.harness.devices.base import DeviceError


def _device_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", required=True, help="host, qemu-aarch64, or an ADB serial")
    p.add_argument("--adb-host", default="127.0.0.1")
    p.add_argument("--adb-port", type=int, default=5037)
    p.add_argument("--workdir", default=None, help="deployment root on the device")


def _open(args: argparse.Namespace) -> Any:
    from omni_edge.harness.devices import open_device

    return open_device(args.device, adb_host=args.adb_host, adb_port=args.adb_port,
                       workdir=getattr(args, "workdir", None))


def _runtime(args: argparse.Namespace, device: Any) -> Any:
    from omni_edge.harness.deploy import runtime_from_dir

    if args.runtime is None:
        return None
    return runtime_from_dir(args.runtime, args.runtime_abi or device.facts().abi or "unknown")


def _devices(args: argparse.Namespace) -> int:
    from omni_edge.harness.devices.adb import list_devices

    try:
        serials = list_devices(host=args.adb_host, port=args.adb_port)
    except DeviceError as exc:
        print(f"adb: {exc}", file=sys.stderr)
        serials = []
    for name in ["host", *serials]:
        args.device = name
        try:
            facts = _open(args).facts()
            print(json.dumps(facts.to_dict()))
        except DeviceError as exc:
            print(json.dumps({"serial": name, "error": str(exc)}))
    return 0


def _push(args: argparse.Namespace) -> int:
    from omni_edge.harness.deploy import deploy, verify_on_target

    try:
        device = _open(args)
        d = deploy(device, args.artifact, plan_name=args.plan_name, name=args.name, runtime=_runtime(args, device))
        verified = verify_on_target(d)
    except DeviceError as exc:
        print(f"omni-edge push: {exc}", file=sys.stderr)
        return 1
    print(json.dumps({**d.to_dict(), "verified": [{"component": v["manifest"]["component"],
                                                   "qualified": v["qualified"]} for v in verified]}))
    return 0


def _profile(args: argparse.Namespace) -> int:
    from omni_edge.harness.deploy import deploy
    from omni_edge.harness.profile import WORKLOADS, run_profile
    from tqdm import tqdm

    try:
        device = _open(args)
        d = deploy(device, args.plan.parent, plan_name=args.plan.name, name=args.name, runtime=_runtime(args, device))
        with tqdm(total=1 + len(args.concurrency), unit="group", file=sys.stderr) as bar:
            report = run_profile(d, WORKLOADS[args.workload], args.out, runs=args.runs, warmup=args.warmup,
                                 concurrency=args.concurrency, threads=args.threads, progress=bar)
    except (DeviceError, ValueError) as exc:
        print(f"omni-edge profile: {exc}", file=sys.stderr)
        return 1
    g = report["groups"][f"concurrency-{args.concurrency[0]}"]["metrics"]
    print(f"{args.out}/report.json: TTFT p50 {g['ttft_ms']['p50']:.1f} ms, decode p50 "
          f"{g['decode_tok_s']['p50']:.1f} tok/s (n={g['ttft_ms']['n']}); report.md and "
          f"{', '.join(report['plots'])}", file=sys.stderr)
    return 0


def _budget(args: argparse.Namespace) -> int:
    from omni_edge.harness.ledger import estimate_plan_budget, mib

    budget = estimate_plan_budget(args.plan, args.sessions)
    if args.json:
        print(json.dumps(budget.to_dict()))
        return 0
    for s in budget.stages:
        print(f"stage {s.stage_id} ({s.pool}): weights {mib(s.weights)}, state {mib(s.state)}, loading peak "
              f"{mib(s.loading_peak)}, workspace {mib(s.workspace)}, margin {mib(s.margin)} = {mib(s.total)}")
    return 0


def _matrix(args: argparse.Namespace) -> int:
    from omni_edge.harness import matrix

    try:
        if args.action == "record":
            if args.blocked_layer:
                path = matrix.record_blocked(args.store, args.route, args.family, args.blocked_layer,
                                             args.reason or "", args.log, args.command_line or "")
            else:
                path = matrix.record_from_artifact(args.store, args.route, args.family, args.artifact,
                                                   args.execution, args.command_line or "", args.profile_report)
            print(path)
            return 0
        cells = matrix.matrix(args.store)
    except (matrix.RecordError, KeyError) as exc:
        print(f"omni-edge matrix: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps([c.to_dict() for c in cells], indent=1))
    elif args.html:
        args.html.write_text(matrix.render_html(cells))
        print(f"wrote {args.html}", file=sys.stderr)
    else:
        sys.stdout.write(matrix.render_text(cells))
    return 0


def add_parsers(sub: Any) -> None:
    from omni_edge.harness.matrix import DEFAULT_STORE, EXECUTIONS
    from omni_edge.harness.profile import WORKLOADS

    p = sub.add_parser("devices", help="list reachable devices (host + ADB) with their facts, one JSON line each")
    p.add_argument("--adb-host", default="127.0.0.1")
    p.add_argument("--adb-port", type=int, default=5037)
    p.set_defaults(func=_devices)

    def runtime_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("--runtime", type=Path, default=None,
                       help="a runtime built for the device: DIR/bin/omni-edge-run + DIR/lib (default: this host's)")
        p.add_argument("--runtime-abi", default=None, help="ABI of --runtime (default: the device's)")
        p.add_argument("--name", default=None, help="deployment directory name on the device")

    p = sub.add_parser("push", help="lay out binary, libraries, artifacts and plan on a device and verify there")
    _device_args(p)
    p.add_argument("--artifact", type=Path, required=True, help="an export directory (with plan.json)")
    p.add_argument("--plan-name", default="plan.json")
    runtime_args(p)
    p.set_defaults(func=_push)

    p = sub.add_parser("profile", help="deploy, then measure startup, requests and memory (report.json/.md + plots)")
    _device_args(p)
    p.add_argument("--plan", type=Path, required=True)
    p.add_argument("--workload", choices=sorted(WORKLOADS), default="short")
    p.add_argument("--runs", type=int, default=20, help="measured requests per group")
    p.add_argument("--warmup", type=int, default=1, help="discarded requests per process")
    p.add_argument("--concurrency", type=lambda t: [int(v) for v in t.split(",")], default=[1],
                   help="concurrent processes per group, e.g. 1,2,4")
    p.add_argument("--threads", type=int, default=0, help="intra-op threads per process (0: all cores)")
    p.add_argument("--out", type=Path, default=Path("work/profile"))
    runtime_args(p)
    p.set_defaults(func=_profile)

    p = sub.add_parser("budget", help="the admission ledger's memory budget of a plan (nothing is loaded)")
    p.add_argument("--plan", type=Path, required=True)
    p.add_argument("--sessions", type=int, default=1)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_budget)

    p = sub.add_parser("matrix", help="device routes × model families, derived from qualification records")
    p.add_argument("action", nargs="?", choices=["show", "record"], default="show")
    p.add_argument("--store", type=Path, default=DEFAULT_STORE)
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true")
    fmt.add_argument("--html", type=Path, default=None, help="write an HTML table here")
    p.add_argument("--route")
    p.add_argument("--family")
    p.add_argument("--artifact", type=Path, help="record: the component that ran")
    p.add_argument("--execution", choices=EXECUTIONS, default="device")
    p.add_argument("--profile-report", type=Path, default=None, help="record: a profile's report.json")
    p.add_argument("--blocked-layer", default=None, help="record a failure: the layer that failed")
    p.add_argument("--reason", default=None)
    p.add_argument("--log", type=Path, default=None, help="record a failure: the log that shows it")
    p.add_argument("--command-line", default=None, help="record: the command that produced the evidence")
    p.set_defaults(func=_matrix)
