"""The harness subcommands of `omni-edge`: devices, push, profile, budget, matrix."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from omni_edge.files import write_text_atomic
from omni_edge.harness.devices.base import DeviceError


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _duration(text: str) -> float:
    from omni_edge.harness.sustained import parse_duration

    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _counts(text: str) -> list[int]:
    return [_positive(v) for v in text.split(",")]


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
    return runtime_from_dir(args.runtime, args.runtime_abi)  # deploy compares it with the device's ABI


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


def _push_app(args: argparse.Namespace) -> int:
    from omni_edge.harness import app

    if args.install is None and args.artifact is None:
        print("omni-edge push --app: give --artifact ART, --install APK, or both", file=sys.stderr)
        return 2
    try:
        device = _open(args)
        if device.kind != "adb":
            raise DeviceError(f"--app needs a phone (an ADB serial), not '{args.device}'")
        if args.install is not None:
            print(json.dumps(app.install_apk(device, args.install)))
        if args.artifact is not None:
            plan = args.artifact / args.plan_name if args.artifact.is_dir() else args.artifact
            print(json.dumps(app.push_to_app(device, plan, name=args.name, package=args.app_package,
                                             root=args.workdir)))
    except (DeviceError, OSError, ValueError) as exc:
        print(f"omni-edge push --app: {exc}", file=sys.stderr)
        return 1
    return 0


def _push(args: argparse.Namespace) -> int:
    from omni_edge.harness.deploy import deploy, verify_on_target

    if args.app:
        return _push_app(args)
    if args.install is not None or args.artifact is None:
        print("omni-edge push: --artifact is required (--install goes with --app)", file=sys.stderr)
        return 2
    try:
        device = _open(args)
        d = deploy(device, args.artifact, plan_name=args.plan_name, name=args.name, runtime=_runtime(args, device))
        verified = verify_on_target(d)
    except (DeviceError, OSError, ValueError) as exc:
        print(f"omni-edge push: {exc}", file=sys.stderr)
        return 1
    print(json.dumps({**d.to_dict(), "verified": [{"component": v["manifest"]["component"],
                                                   "qualified": v["qualified"]} for v in verified]}))
    return 0


def _bundle(args: argparse.Namespace) -> int:
    from omni_edge.harness.bundle import BundleError, build_bundle, verify_bundle

    def progress(step: str) -> None:
        print(f"[bundle] {step}", file=sys.stderr)

    try:
        manifest = build_bundle(args.target, args.out, plan=args.plan, tests=args.tests, build_type=args.build_type,
                                progress=progress)
        report = verify_bundle(args.out)
    except (BundleError, DeviceError, OSError) as exc:
        print(f"omni-edge bundle: {exc}", file=sys.stderr)
        return 2
    size = sum(p.stat().st_size for p in args.out.rglob("*") if p.is_file())
    print(json.dumps({k: v for k, v in manifest.items() if k != "files"} | {"out": str(args.out), "files": report["files"],
                                                                            "bytes": size}))
    return 0


def _profile(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from omni_edge.harness.deploy import deploy
    from omni_edge.harness.profile import run_profile
    from omni_edge.harness.profile_kinds import (
        POLICY,
        SPEECH,
        WORKLOADS,
        plan_image_grids,
        plan_kind,
        plan_media,
        write_media,
        write_observation,
    )

    try:
        kind = plan_kind(args.plan)
        device = _open(args)
        d = deploy(device, args.plan.parent, plan_name=args.plan.name, name=args.name, runtime=_runtime(args, device))
        workload = WORKLOADS[kind][args.workload]
        modalities = plan_media(args.plan)
        if modalities:  # a multimodal plan: an image and audio with every request, pushed beside the artifacts
            grids = plan_image_grids(args.plan)
            media = []
            for modality, local in write_media(args.out / "media", modalities, grids[0] if grids else None):
                remote = f"{d.root}/media/{local.name}"
                device.put_file(local, remote)
                media.append((modality, remote))
            workload = dataclasses.replace(workload, prompt="What do you see and hear?", media=tuple(media))
        if kind == POLICY:  # an observation (camera images, state, the task) pushed beside the artifacts
            obs = write_observation(args.out / "observation", args.plan, workload.prompt)
            for local in sorted(obs.parent.iterdir()):
                device.put_file(local, f"{d.root}/observation/{local.name}")
            workload = dataclasses.replace(workload, observation=f"{d.root}/observation/{obs.name}")
        groups = 1 + len(args.concurrency) + (kind != "text") + (args.duration is not None) + args.trace + args.reliability
        with tqdm(total=groups, unit="group", file=sys.stderr) as bar:
            report = run_profile(d, workload, args.out, kind=kind, runs=args.runs,
                                 warmup=args.warmup, concurrency=args.concurrency, threads=args.threads,
                                 prebuffer_ms=args.prebuffer_ms, duration_s=args.duration, trace=args.trace,
                                 reliability=args.reliability, progress=bar)
    except (DeviceError, OSError, ValueError) as exc:
        print(f"omni-edge profile: {exc}", file=sys.stderr)
        return 1
    g = report["groups"][f"concurrency-{args.concurrency[0]}"]["metrics"]
    if kind == POLICY:
        print(f"{args.out}/report.json (policy): total p50 {g['total_ms']['p50']:.1f} ms, prefix p50 "
              f"{g['prefix_ms']['p50']:.1f} ms, step p50 {g['step_ms']['p50']:.2f} ms, observation age at emission p95 "
              f"{g['age_at_emission_ms']['p95']:.1f} ms, deadline {workload.deadline_ms:g} ms missed in "
              f"{100 * (g['deadline_missed']['mean'] or 0):.0f}% (n={g['total_ms']['n']}); report.md and "
              f"{', '.join(report['plots'])}", file=sys.stderr)
        return 0
    first = "first_pcm_ms" if kind == SPEECH else "ttft_ms"
    line = f"{args.out}/report.json ({kind}): {first.replace('_ms', '')} p50 {g[first]['p50']:.1f} ms (n={g[first]['n']})"
    if kind != "text":
        stop = report["speech"]["interruption"]["metrics"]["stop_to_terminal_ms"]
        line += (f", RTF p50 {g['rtf']['p50']:.3f}, underruns p95 {g['underruns']['p95']:.0f}, "
                 f"stop -> end p50 {stop['p50'] or 0:.1f} ms")
    if kind != SPEECH:
        line += f", decode p50 {g['decode_tok_s']['p50']:.1f} tok/s"
    if report["sustained"]:
        s = report["sustained"]
        drift = s["last_over_first"][s["throughput_metric"]]
        line += (f"; sustained {s['duration_s']:.0f} s: {s['requests']} requests, last/first quarter "
                 f"{s['throughput_metric']} {drift or 0:.3f}, RSS slope {s['rss_mb']['slope_mb_per_min'] or 0:.2f} MB/min")
    if report["reliability"]:
        r = report["reliability"]
        line += "; reliability " + ", ".join(f"{k} {'pass' if v['passed'] else 'FAIL'}" for k, v in r["scenarios"].items())
    if report["trace"]:
        line += f"; trace {args.out}/trace.json ({report['trace']['graph_runs']} graph runs)"
    print(f"{line}; report.md and {', '.join(report['plots'])}", file=sys.stderr)
    return 0 if not report["reliability"] or report["reliability"]["passed"] else 1


def _budget(args: argparse.Namespace) -> int:
    from omni_edge.harness.ledger import AdmissionError, check_memory_budget, estimate_plan_budget, mib, on_wsl

    try:
        budget = estimate_plan_budget(args.plan, args.sessions, wsl=on_wsl())
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"omni-edge budget: {args.plan}: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(budget.to_dict()))
        return 0
    for s in budget.stages:
        print(f"stage {s.stage_id} ({s.pool}): weights {mib(s.weights)}, state {mib(s.state)}, loading peak "
              f"{mib(s.loading_peak)}, workspace {mib(s.workspace)}, margin {mib(s.margin)} = {mib(s.total)}")
    try:
        check_memory_budget(json.loads(args.plan.read_text()), budget, args.plan)
    except AdmissionError as exc:
        print(f"omni-edge budget: refused: {exc}", file=sys.stderr)
        return 1
    return 0


def _matrix(args: argparse.Namespace) -> int:
    from omni_edge.harness import matrix

    try:
        if args.action == "record":
            if args.route is None or args.family is None:
                raise matrix.RecordError("record needs --route and --family")
            if args.blocked_layer:
                if args.log is None:
                    raise matrix.RecordError("a blocked record needs --log: the failure log is its evidence")
                path = matrix.record_blocked(args.store, args.route, args.family, args.blocked_layer,
                                             args.reason or "", args.log, args.command_line or "")
            else:
                if args.artifact is None:
                    raise matrix.RecordError("record needs --artifact (or --blocked-layer with --log)")
                path = matrix.record_from_artifact(args.store, args.route, args.family, args.artifact,
                                                   args.execution, args.command_line or "", args.profile_report)
            print(path)
            return 0
        cells = matrix.matrix(args.store)
    except (ValueError, KeyError, OSError) as exc:  # RecordError, ContractError and JSON errors are ValueErrors
        print(f"omni-edge matrix: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps([c.to_dict() for c in cells], indent=1))
    elif args.html:
        write_text_atomic(args.html, matrix.render_html(cells))
        print(f"wrote {args.html}", file=sys.stderr)
    else:
        sys.stdout.write(matrix.render_text(cells))
    return 0


def add_parsers(sub: Any) -> None:
    from omni_edge.harness.matrix import DEFAULT_STORE, EXECUTIONS

    p = sub.add_parser("devices", help="list reachable devices (host + ADB) with their facts, one JSON line each")
    p.add_argument("--adb-host", default="127.0.0.1")
    p.add_argument("--adb-port", type=int, default=5037)
    p.set_defaults(func=_devices)

    def runtime_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("--runtime", type=Path, default=None,
                       help="a runtime built for the device: DIR/bin/omni-edge-run + DIR/lib (default: this host's)")
        p.add_argument("--runtime-abi", default=None, help="the ABI --runtime must have (read from its binary; mismatch = error)")
        p.add_argument("--name", default=None, help="deployment directory name on the device")

    p = sub.add_parser("push", help="lay out binary, libraries, artifacts and plan on a device and verify there")
    _device_args(p)
    p.add_argument("--artifact", type=Path, help="an export directory (with plan.json)")
    p.add_argument("--plan-name", default="plan.json")
    p.add_argument("--app", action="store_true", help="for the Android app: artifacts and plan only, into "
                   "/sdcard/Android/data/PACKAGE/files/NAME/ (--workdir overrides the files directory)")
    p.add_argument("--app-package", default="dev.omniedge.app")
    p.add_argument("--install", type=Path, metavar="APK", help="with --app: install this APK first (adb install -r -t)")
    runtime_args(p)
    p.set_defaults(func=_push)

    p = sub.add_parser("bundle", help="cross-build the controller for a device: binary, runtime libraries, bundle.json")
    p.add_argument("--target", required=True, choices=["linux-aarch64", "windows-arm64", "windows-x64", "android-arm64"])
    p.add_argument("--out", type=Path, required=True, help="the bundle directory (replaced whole)")
    p.add_argument("--plan", type=Path, default=None, help="also carry this plan and every artifact it names")
    p.add_argument("--tests", action="store_true", help="also build the C++ unit tests for the target (in build/targets/)")
    p.add_argument("--build-type", choices=["Release", "RelWithDebInfo", "Debug"], default="Release")
    p.set_defaults(func=_bundle)

    p = sub.add_parser("profile", help="deploy, then measure startup, requests and memory (report.json/.md + plots)")
    _device_args(p)
    p.add_argument("--plan", type=Path, required=True)
    p.add_argument("--workload", choices=["short", "medium", "long"], default="short",
                   help="per plan kind (text, speech, omni): harness/profile_kinds.py")
    p.add_argument("--runs", type=_positive, default=20,
                   help="measured requests per group (fewer than 20 is reported as below the protocol)")
    p.add_argument("--warmup", type=int, default=1, help="discarded requests per process")
    p.add_argument("--concurrency", type=_counts, default=[1],
                   help="concurrent processes per group, e.g. 1,2,4")
    p.add_argument("--threads", type=int, default=0, help="intra-op threads per process (0: all cores)")
    p.add_argument("--prebuffer-ms", type=int, default=None,
                   help="speech/omni: audio queued before playback starts (default: the controller's 200 ms)")
    p.add_argument("--duration", type=_duration, default=None,
                   help="also a sustained run of this length (30m, 2m, 45s): requests back to back, RSS and the "
                        "device's sensors (CPU clocks, thermal zones, battery) sampled every 2 s, a trend plot")
    p.add_argument("--trace", action="store_true",
                   help="also one traced request: OUT/trace.json (Chrome trace JSON; open it in ui.perfetto.dev), "
                        "reported apart from the untraced groups")
    p.add_argument("--reliability", action="store_true",
                   help="also the protocol's reliability scenarios: slow consumer, cancel storm, 100 repeated "
                        "sessions, a killed worker (pass/fail with evidence)")
    p.add_argument("--out", type=Path, default=Path("work/profile"))
    runtime_args(p)
    p.set_defaults(func=_profile)

    p = sub.add_parser("budget", help="the admission ledger's memory budget of a plan (nothing is loaded)")
    p.add_argument("--plan", type=Path, required=True)
    p.add_argument("--sessions", type=_positive, default=1)
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
