"""`omni-edge profile` (deploy a plan, then the profiling protocol of its kind: startup, requests,
memory, and optionally concurrency, a sustained run, a trace, the reliability scenarios) and
`omni-edge budget` (the admission ledger's numbers for a plan, nothing loaded)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from omni_edge.cli import flags
from omni_edge.cli.deploy import device_of, runtime_of
from omni_edge.harness.devices.base import DeviceError


def add_parsers(sub: Any) -> None:
    from omni_edge.cli.deploy import deployment

    p = sub.add_parser("profile", help="deploy, then measure startup, requests and memory (report.json/.md + plots)")
    flags.device(p, required=True)
    p.add_argument("--plan", type=Path, required=True)
    p.add_argument("--workload", choices=["short", "medium", "long"], default="short",
                   help="per plan kind (text, speech, omni, multimodal, policy): harness/profiling/kinds/")
    p.add_argument("--runs", type=flags.positive, default=20,
                   help="measured requests per group (fewer than 20 is reported as below the protocol)")
    p.add_argument("--warmup", type=flags.whole(0, 1 << 20), default=1, help="discarded requests per process")
    p.add_argument("--concurrency", type=flags.positive_list, default=(1,),
                   help="concurrent processes per group, e.g. 1,2,4")
    flags.threads(p, "intra-op threads per process (0: all cores)")
    p.add_argument("--prebuffer-ms", type=flags.whole(0, 60_000), default=None,
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
    p.add_argument("--serving", action="store_true",
                   help="also the workload through the device's own server (omni-edge-run serve, port forwarded), "
                        "streamed as an OpenAI client reads it: the client's TTFT and rate against the server's own, "
                        "beside the in-process numbers (text, speech and omni plans)")
    p.add_argument("--duplex", action="store_true",
                   help="also spoken conversations with barge-in through the device's /v1/realtime (a plan that "
                        "hears and speaks, with its voice activity detector): voice-to-voice and interruption "
                        "latency, and their parts (espeak-ng speaks the workload on this host)")
    p.add_argument("--out", type=Path, default=Path("work/profile"))
    deployment(p)
    p.set_defaults(func=profile)

    p = sub.add_parser("budget", help="the admission ledger's memory budget of a plan (nothing is loaded)")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--plan", type=Path)
    what.add_argument("--family", help="a model family of the qualification matrix at its real size (e.g. 27b), "
                                       "sized from its shapes: no artifact needed")
    p.add_argument("--sessions", type=flags.positive, default=1)
    p.add_argument("--routes", action="store_true", help="also: which of the matrix's device routes admit it, with "
                                                        "the numbers")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=budget)


def _duration(text: str) -> float:
    from omni_edge.harness.profiling.sustained import parse_duration

    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def profile(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from omni_edge.harness.deploy.deploy import deploy
    from omni_edge.harness.profiling.kinds import kind_of
    from omni_edge.harness.profiling.profile import group_names, run_profile
    from omni_edge.harness.profiling.serving import SERVED_KINDS

    try:
        kind = kind_of(args.plan)
        if args.duplex:
            _check_duplex(args.plan)
        if args.serving and kind.name not in SERVED_KINDS:
            raise ValueError(f"--serving sends text, speech and omni workloads; a {kind.name} plan's inputs (media, "
                             "observations) do not go through it yet")
        device = device_of(args)
        d = deploy(device, args.plan.parent, plan_name=args.plan.name, name=args.name, runtime=runtime_of(args))
        # The kind's inputs (a multimodal plan's media, a policy's observation) pushed beside the artifacts.
        workload = kind.prepare(kind.workload(args.workload), device, d.root, args.out)
        groups = group_names(kind, args.concurrency, trace=args.trace, reliability=args.reliability,
                             sustained=args.duration is not None, serving=args.serving, duplex=args.duplex)
        with tqdm(total=len(groups), unit="group", file=sys.stderr) as bar:
            report = run_profile(d, workload, args.out, kind=kind, runs=args.runs,
                                 warmup=args.warmup, concurrency=args.concurrency, threads=args.threads,
                                 prebuffer_ms=args.prebuffer_ms, duration_s=args.duration, trace=args.trace,
                                 reliability=args.reliability, serving=args.serving, duplex=args.duplex,
                                 progress=bar)
    except (DeviceError, OSError, ValueError) as exc:
        print(f"omni-edge profile: {exc}", file=sys.stderr)
        return 1
    print(kind.summary_line(report, args.out), file=sys.stderr)
    return kind.exit_status(report)


def _check_duplex(plan: Path) -> None:
    """Refused before anything is deployed: a plan that cannot hold a spoken conversation."""
    import json

    p = json.loads(plan.read_text())
    if "voice_activity" not in p or not any(s.get("model_stage") == "audio_encoder" for s in p.get("stages", [])):
        raise ValueError(f"--duplex needs a plan that hears (an audio encoder) with a voice_activity component "
                         f"(export omni attaches one; export vad --plan adds it): {plan} has "
                         f"{'no voice_activity' if 'voice_activity' not in p else 'no audio encoder'}")


def budget(args: argparse.Namespace) -> int:
    from omni_edge.harness.qualification.ledger import AdmissionError, check_memory_budget, estimate_plan_budget, mib, on_wsl
    from omni_edge.harness.qualification.matrix import route_admissions

    try:
        if args.family:
            from omni_edge.harness.qualification.catalog import family

            budget = family(args.family).footprint.budget(sessions=args.sessions)
        else:
            budget = estimate_plan_budget(args.plan, args.sessions, wsl=on_wsl())
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"omni-edge budget: {args.plan or args.family}: {exc}", file=sys.stderr)
        return 1
    routes = route_admissions(budget, str(args.plan or args.family)) if args.routes else []
    if args.json:
        print(json.dumps(budget.to_dict() | ({"routes": routes} if args.routes else {})))
        return 0
    for s in budget.stages:
        print(f"stage {s.stage_id} ({s.pool}): weights {mib(s.weights)}, state {mib(s.state)}, loading peak "
              f"{mib(s.loading_peak)}, workspace {mib(s.workspace)}, margin {mib(s.margin)} = {mib(s.total)}")
    for r in routes:
        print(f"{r['route']}: {'admitted' if r['admitted'] else 'rejected'}: needs {r['need_mib']:.0f} MiB of "
              f"{r['pool']}, which holds {r['capacity_mib']:.0f} MiB" + ("" if r["admitted"] else f" ({r['reason']})"))
    if args.family:
        return 0
    try:
        check_memory_budget(json.loads(args.plan.read_text()), budget, args.plan)
    except AdmissionError as exc:
        print(f"omni-edge budget: refused: {exc}", file=sys.stderr)
        return 1
    return 0
