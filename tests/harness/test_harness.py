"""The harness end to end: push + profile on the host and through the ADB protocol, the
admission ledger (native and its Python mirror) and the qualification matrix."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from adb_server import FakeAdbServer
from llm_reference import cli
from omni_edge import _native
from omni_edge.contracts import ContractError
from omni_edge.harness.qualification import ledger, matrix
from omni_edge.harness.qualification.catalog import FAMILIES, ROUTES
from paths import RUN
from profile_checks import PNG, check_chrome_trace, check_speech_profile


def _check_profile(out: Path, runs: int, groups: list[str], extra_launches: int = 0) -> dict:
    report = json.loads((out / "report.json").read_text())
    assert report["verified_on_target"] == [{"component": "thinker-onnx", "qualified": True}]
    assert report["startup"]["warm_restart"]["load_ms"]["n"] == runs
    assert report["startup"]["cold"]["load_ms"] > 0
    for g in groups:
        metrics = report["groups"][g]["metrics"]
        for name in ("ttft_ms", "total_ms", "decode_tok_s"):
            m = metrics[name]
            assert m["n"] >= runs and 0 < m["p50"] <= m["p95"] <= m["max"], (g, name, m)
        assert metrics["token_interval_ms"]["n"] >= runs * 31  # 32 tokens: 31 gaps per request
    # Honest placement: every graph of the CPU plan ran on the CPU provider, nothing elsewhere.
    assert report["placement"] and {(p["device"], p["engine"], p["nodes_elsewhere"]) for p in report["placement"]} == {
        ("cpu", "CPUExecutionProvider", 0)}
    mem = report["memory"]
    assert mem["process_peak_rss_mb"]["max"] > 10 and mem["samples"] > 0
    # The ledger's prediction is within a factor of two of what the process really held.
    assert 0.5 < report["ledger"]["measured_over_predicted"] < 2.0, report["ledger"]
    for plot in report["plots"]:
        assert (out / plot).read_bytes()[:8] == PNG and (out / plot).stat().st_size > 10_000
    md = (out / "report.md").read_text()
    assert "| concurrency-1 | ttft_ms |" in md and "![memory.png](memory.png)" in md
    launches = 1 + runs + sum(int(g.split("-")[1]) for g in groups) + extra_launches
    assert len(list((out / "raw" / "logs").glob("*.stdout.jsonl"))) == launches
    samples = json.loads((out / "raw" / "samples.json").read_text())
    assert len(samples["startup_rows"]) == 1 + runs
    assert (out / "raw" / "outputs.txt").read_text().count("\n") >= launches
    return report


def test_host_push_is_hash_skipped_and_profile_writes_the_report(tiny_artifact: Path, tmp_path: Path) -> None:
    workdir = str(tmp_path / "device")
    first = cli("push", "--device", "host", "--workdir", workdir, "--artifact", str(tiny_artifact))
    assert first.returncode == 0, first.stderr[-2000:]
    pushed = json.loads(first.stdout)
    assert pushed["files_sent"] > 10 and pushed["verified"] == [{"component": "thinker-onnx", "qualified": True}]
    again = json.loads(cli("push", "--device", "host", "--workdir", workdir, "--artifact", str(tiny_artifact)).stdout)
    assert again["files_sent"] == 0 and again["files_skipped"] == pushed["files_sent"]

    # A file changed on the target is re-sent, and nothing runs before the target re-verified.
    plan = json.loads(Path(pushed["plan"]).read_text())
    tokenizer = Path(pushed["root"]) / plan["stages"][0]["artifact"] / "tokenizer.json"
    tokenizer.write_text("{}")
    bad = subprocess.run([str(Path(pushed["root"]) / "bin" / "omni-edge-run"), "verify", str(tokenizer.parent)],
                         capture_output=True, text=True, env={"LD_LIBRARY_PATH": str(Path(pushed["root"]) / "lib")})
    assert bad.returncode != 0 and "tokenizer.json" in bad.stderr
    healed = json.loads(cli("push", "--device", "host", "--workdir", workdir, "--artifact", str(tiny_artifact)).stdout)
    assert healed["files_sent"] == 1

    out = tmp_path / "profile"
    done = cli("profile", "--device", "host", "--workdir", workdir, "--plan", str(tiny_artifact / "plan.json"),
               "--workload", "short", "--runs", "20", "--warmup", "1", "--concurrency", "1,2", "--duration", "4s",
               "--trace", "--reliability", "--out", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    # + sustained, traced, and the reliability scenarios' 2 + 20 + 1 + 2 launches
    report = _check_profile(out, 20, ["concurrency-1", "concurrency-2"], extra_launches=2 + 25)
    assert report["device"]["kind"] == "host" and report["deployment"]["files_sent"] == 0
    # The sustained run: requests back to back for 4 s, RSS and sensors every 2 s, said what they cover.
    sustained, series = report["sustained"], json.loads((out / "raw" / "samples.json").read_text())["sustained"]
    assert sustained["duration_s"] == 4 and sustained["requests"] == len(series["requests"]) >= 10
    assert 1 <= sustained["sensor_samples"] == len(series["sensors"]) <= 3 and series["memory"]
    assert all(0 < r["t_s"] <= 4 + 60 and r["decode_tok_s"] > 0 for r in series["requests"])
    assert sustained["last_over_first"]["decode_tok_s"] > 0
    assert "never the NPU's" in sustained["covers"]["battery"] or sustained["covers"]["battery"].startswith("no battery")
    assert "sustained.png" in report["plots"] and "## Sustained" in (out / "report.md").read_text()
    # The traced request: a separate process, its trace pulled back and readable by Perfetto.
    check_chrome_trace(out / "trace.json")
    traced = report["trace"]
    assert traced["file"] == "trace.json" and traced["graph_runs"] >= 32 and set(traced["graph_ms_by_device"]) == {"cpu"}
    assert traced["threads"] == ["caller", "stage 0 thinker"] and "## Trace" in (out / "report.md").read_text()
    # Reliability: every scenario passed, with the evidence that says why.
    r = report["reliability"]
    assert r["passed"], json.dumps(r, indent=1)
    sc = r["scenarios"]
    assert sc["slow_consumer"]["n_generated_tokens"] == {"normal": 32, "slow": 32} and not sc["slow_consumer"]["faults"]
    assert sc["cancel_storm"]["runs"] == 20 and sc["cancel_storm"]["endings"].get("cancelled", 0) >= 5
    assert sc["repeated_sessions"]["sessions"] == 100 and sc["repeated_sessions"]["measured"] == "heap_in_use_mb"
    assert sc["killed_worker"]["returncode"] == -9 and sc["killed_worker"]["next_launch_done"]
    assert sc["killed_worker"]["terminal_reported"]["text"]["reason"] == "worker_killed"
    assert "## Reliability" in (out / "report.md").read_text()


def test_a_speech_plan_is_profiled_with_the_speech_dimensions(tts_artifact: Path, tmp_path: Path) -> None:
    out = tmp_path / "profile"
    done = cli("profile", "--device", "host", "--workdir", str(tmp_path / "device"), "--plan", str(tts_artifact),
               "--runs", "4", "--warmup", "1", "--serving", "--out", str(out))  # n >= 20: test_host_push_is_hash_skipped...
    assert done.returncode == 0, done.stderr[-3000:]
    report = check_speech_profile(out, "speech", 4)
    assert report["protocol"]["met"] is False  # fewer than 20 measured requests is said, not hidden
    rows = json.loads((out / "raw" / "samples.json").read_text())["serving_rows"]  # /v1/audio/speech, as events
    assert len(rows) == 4 and all(r["client_first_pcm_ms"] >= r["server_first_pcm_ms"] > 0 for r in rows)
    assert "ttft_ms" not in report["groups"]["concurrency-1"]["metrics"]
    assert "(speech): first_pcm p50" in done.stderr


def test_adb_push_and_profile_through_the_adb_protocol(tiny_artifact: Path, tmp_path: Path) -> None:
    # An x86_64 Android target (what an emulator image is) so this host's build is the right ABI.
    props = {"ro.soc.model": "SM8750", "ro.product.cpu.abi": "x86_64", "ro.build.version.release": "15",
             "ro.build.fingerprint": "google/sdk_gphone64_x86_64/emu64x:15/AE3A.240806.005:userdebug/dev-keys"}
    with FakeAdbServer({"emulator-5554": props, "phone-arm": {"ro.product.cpu.abi": "arm64-v8a"}}) as server:
        common = ["--adb-port", str(server.port), "--workdir", str(tmp_path / "data-local-tmp")]
        pushed = cli("push", "--device", "emulator-5554", *common, "--artifact", str(tiny_artifact))
        assert pushed.returncode == 0, pushed.stderr[-2000:]
        assert json.loads(pushed.stdout)["verified"][0]["qualified"] is True
        assert any(r.startswith("sync:") for r in server.requests)  # files went over the sync protocol

        wrong = cli("push", "--device", "phone-arm", *common, "--artifact", str(tiny_artifact))
        assert wrong.returncode == 1 and "phone-arm is arm64-v8a but the runtime is x86_64" in wrong.stderr

        out = tmp_path / "profile"
        done = cli("profile", "--device", "emulator-5554", *common, "--plan", str(tiny_artifact / "plan.json"),
                   "--runs", "20", "--warmup", "1", "--concurrency", "1", "--threads", "1", "--serving", "--out", str(out))
        assert done.returncode == 0, done.stderr[-3000:]
        assert any(r.startswith("host-serial:emulator-5554:forward:tcp:") for r in server.requests)
        assert server.forwards == {}  # removed when the serving group ended
    report = _check_profile(out, 20, ["concurrency-1"])
    assert report["device"]["serial"] == "emulator-5554" and report["device"]["soc"] is not None
    assert report["memory"]["pss_readable"] is True  # PSS read from the device's /proc
    # The same workload through the phone's own server, behind the ADB forward: two clocks per response.
    serving, rows = report["serving"], json.loads((out / "raw" / "samples.json").read_text())["serving_rows"]
    assert serving["requests"] == len(rows) == 20 and all(r["tokens"] == 32 for r in rows)
    assert all(r["client_ttft_ms"] >= r["server_ttft_ms"] > 0 and r["server_rss_mb"] > 0 for r in rows)
    assert serving["transport"]["ttft_ms"] > 0 and serving["in_process"]["ttft_ms"] > 0
    assert "## Through the server" in (out / "report.md").read_text() and "through the server +" in done.stderr


def test_devices_lists_the_host_and_adb_serials(tmp_path: Path) -> None:
    with FakeAdbServer({"emu-a": {"ro.product.cpu.abi": "x86_64"}}) as server:
        done = cli("devices", "--adb-port", str(server.port))
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert [d["serial"] for d in lines] == ["host", "emu-a"] and lines[1]["abi"] == "x86_64"


def test_the_python_ledger_reads_the_native_budget(tiny_artifact: Path) -> None:
    plan = tiny_artifact / "plan.json"
    for sessions in (1, 3):
        native = json.loads(_native.plan_budget(str(plan), sessions))
        assert ledger.estimate_plan_budget(plan, sessions).to_dict() == native
    one, three = (ledger.estimate_plan_budget(plan, n).stages[0] for n in (1, 3))
    assert three.state == 3 * one.state > 0 and three.weights == one.weights > 0
    with pytest.raises(ContractError, match="sessions: at least 1"):
        _native.plan_budget(str(plan), 0)


def test_speech_budget_counts_shared_weights_once_and_both_kv_caches(tts_artifact: Path) -> None:
    for sessions in (1, 2):
        assert json.loads(_native.plan_budget(str(tts_artifact), sessions)) == \
            ledger.estimate_plan_budget(tts_artifact, sessions).to_dict()
    talker, vocoder = ledger.estimate_plan_budget(tts_artifact).stages
    plan = json.loads(tts_artifact.read_text())
    t = plan["stages"][0]["talker"]
    kv = sum(2 * c["num_layers"] * c["num_kv_heads"] * c["head_dim"] * 4 * c["kv"]["buckets"][-1]
             for c in (t["decoder"], t["predictor"]))
    assert talker.state == kv and talker.weights > 0
    assert vocoder.weights == 0 and vocoder.state == 0  # the same artifact: its weights are the talker's


def test_the_controller_refuses_a_plan_that_does_not_fit_before_loading(tiny_artifact: Path, tmp_path: Path) -> None:
    base = [str(RUN), "--plan", str(tiny_artifact / "plan.json"), "--prompt", "hi", "--max-new-tokens", "2", "--json"]
    small = subprocess.run([*base, "--memory-pools", '{"device_ram": 1000000}'], capture_output=True, text=True)
    # --json ends the stream with its terminal event even when nothing was loaded.
    (line,) = small.stdout.splitlines()
    assert small.returncode == 1 and json.loads(line)["kind"] == "error" and json.loads(line)["reason"] == "admission"
    assert "admission:" in small.stderr and "needs" in small.stderr and "nothing was loaded" in small.stderr
    wrong_pool = subprocess.run([*base, "--memory-pools", '{"vram": 1000000000000}'], capture_output=True, text=True)
    assert wrong_pool.returncode == 1 and "which this device does not have" in wrong_pool.stderr
    for bad in ('{"ram": 5}', '{"device_ram": -1}', "[", '{"device_ram": "big"}'):
        r = subprocess.run([*base, "--memory-pools", bad], capture_output=True, text=True)
        assert r.returncode == 1 and "pools" in r.stderr, (bad, r.stderr)
        assert json.loads(r.stdout)["kind"] == "error", r.stdout
    # A plan's own memory_budget_mb is a cap too.
    plan = json.loads((tiny_artifact / "plan.json").read_text())
    plan["memory_budget_mb"] = 1
    capped = tmp_path / "plan.json"
    capped.write_text(json.dumps({**plan, "stages": [{**s, "artifact": str(tiny_artifact / s["artifact"])}
                                                     for s in plan["stages"]]}))
    for pools in ("auto", "off"):  # the cap holds with or without a ledger
        r = subprocess.run([str(RUN), "--plan", str(capped), "--prompt", "hi", "--json", "--memory-pools", pools],
                           capture_output=True, text=True)
        assert r.returncode == 1 and "memory_budget_mb is 1" in r.stderr, (pools, r.stderr)
    mirror = cli("budget", "--plan", str(capped))  # the Python mirror refuses it with the same words
    assert mirror.returncode == 1 and "memory_budget_mb is 1" in mirror.stderr
    ok = subprocess.run([*base, "--profile"], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    session = json.loads(ok.stdout.splitlines()[0])
    assert session["kind"] == "session" and session["ledger"]["reservations"][0]["bytes"]["device_ram"] > 0


def test_bad_numbers_and_bad_plans_are_clear_errors(tiny_artifact: Path, tmp_path: Path) -> None:
    plan = str(tiny_artifact / "plan.json")
    for flag, value in (("--max-new-tokens", "nan"), ("--max-new-tokens", "1e300"), ("--repeat", "2.5"),
                        ("--repeat", "0"), ("--seed", "-1"), ("--threads", "inf"), ("--top-k", "x")):
        r = subprocess.run([str(RUN), "--plan", plan, "--prompt", "hi", flag, value], capture_output=True, text=True)
        assert r.returncode == 2 and flag in r.stderr and r.stdout == "", (flag, value, r.stderr)
    (tmp_path / "broken.json").write_text("{")
    for args in (["--plan", str(tmp_path / "absent.json")], ["--plan", str(tmp_path / "broken.json")]):
        r = cli("budget", *args)
        assert r.returncode == 1 and r.stderr.startswith("omni-edge budget:") and "Traceback" not in r.stderr
    for args in (["budget", "--plan", plan, "--sessions", "0"],
                 ["profile", "--device", "host", "--plan", plan, "--concurrency", "1,0"],
                 ["profile", "--device", "host", "--plan", plan, "--runs", "0"]):
        r = cli(*args)
        assert r.returncode == 2 and "must be at least 1" in r.stderr and "Traceback" not in r.stderr, args
    for duration in ("0m", "-5s", "ten minutes", "3d"):
        r = cli("profile", "--device", "host", "--plan", plan, f"--duration={duration}")
        assert r.returncode == 2 and "a duration is a positive number with s, m or h" in r.stderr, (duration, r.stderr)


@pytest.mark.parametrize("impl", ["native", "python"])
def test_ledger_all_or_nothing_release_and_quarantine(impl: str) -> None:
    mb = 1 << 20
    if impl == "native":
        native = _native.AdmissionLedger(json.dumps({"device_ram": 100 * mb, "vram": 10 * mb}))
        reserve = lambda owner, d: native.reserve(owner, json.dumps(d))  # noqa: E731
        release, forgive, free = native.release, native.forgive, native.free
        refused: type[Exception] = ContractError
    else:
        py = ledger.Ledger({"device_ram": 100 * mb, "vram": 10 * mb})
        reserve, release, forgive, free = py.reserve, py.release, py.forgive, py.free
        refused = ledger.AdmissionError
    a = reserve("thinker", {"device_ram": 60 * mb})
    with pytest.raises(refused, match=r"talker needs 11\.0 MiB of vram but only 10\.0 MiB of 10\.0 MiB is free"):
        reserve("talker", {"device_ram": 30 * mb, "vram": 11 * mb})
    assert free("device_ram") == 40 * mb and free("vram") == 10 * mb  # nothing charged
    release(a, False)  # the drain was not confirmed: quarantined, still charged
    with pytest.raises(refused, match=r"held by thinker 60\.0 MiB \(quarantined\); nothing was loaded"):
        reserve("vocoder", {"device_ram": 50 * mb})
    forgive(a)
    assert free("device_ram") == 100 * mb
    with pytest.raises((ValueError, ContractError)):
        release(a, True)


def test_matrix_shows_72_cells_with_the_27b_rejected_on_small_devices(tmp_path: Path) -> None:
    done = cli("matrix", "--json", "--store", str(tmp_path))
    assert done.returncode == 0, done.stderr
    cells = json.loads(done.stdout)
    assert len(cells) == len(ROUTES) * len(FAMILIES) == 72
    by = {(c["route"], c["family"]): c for c in cells}
    for small in ("galaxy-s25", "galaxy-s24", "rb3-gen2"):
        c = by[(small, "27b")]
        assert c["status"] == "capacity-rejected" and "MiB of device_ram but only" in c["detail"]
        assert c["budget"]["pools"]["device_ram"] > 12 << 30
    assert by[("cpu-windows", "spark")]["status"] == "not attempted"
    # The 27B is Qwen3.5-27B's hybrid at int4: its budget per route, the recurrent state sets in its state.
    budget = json.loads(cli("budget", "--family", "27b", "--routes", "--json").stdout)
    routes = {r["route"]: r for r in budget["routes"]}
    assert routes["x-elite"]["admitted"] and not routes["galaxy-s25"]["admitted"]
    assert "6144.0 MiB of 6144.0 MiB is free" in routes["galaxy-s25"]["reason"]
    kv_4k = 2 * 16 * 4 * 256 * 4 * 4096  # the 16 attention layers' float32 keys and values
    recurrent_set = 48 * (48 * 128 * 128 + 10240 * 3) * 4
    assert budget["stages"][0]["state"] == kv_4k + 5 * recurrent_set  # four in the history, one saved
    text = cli("matrix", "--store", str(tmp_path)).stdout
    assert "72 cells:" in text and text.count("capacity") >= 4
    html = tmp_path / "m.html"
    assert cli("matrix", "--html", str(html), "--store", str(tmp_path)).returncode == 0
    assert html.read_text().count("<td") == 72


def test_matrix_statuses_come_from_records_and_evidence(tiny_artifact: Path, tmp_path: Path) -> None:
    component = tiny_artifact / "thinker-onnx"
    rec = cli("matrix", "record", "--store", str(tmp_path), "--route", "cpu-windows", "--family", "spark",
              "--artifact", str(component), "--execution", "host", "--command-line", "pytest")
    assert rec.returncode == 0, rec.stderr
    log = tmp_path / "failure.log"
    log.write_text("Failed to initialize QNN backend for kHtpBackend\n")
    blocked = cli("matrix", "record", "--store", str(tmp_path), "--route", "x-elite", "--family", "qwen3-tts",
                  "--blocked-layer", "executorch-qnn", "--reason", "QNN ABI mismatch", "--log", str(log))
    assert blocked.returncode == 0, blocked.stderr
    cells = {(c["route"], c["family"]): c for c in json.loads(cli("matrix", "--json", "--store", str(tmp_path)).stdout)}
    # Ran on the host with a tiny local checkpoint: the artifact is ready, the family is not shown correct.
    host = cells[("cpu-windows", "spark")]
    assert host["status"] == "artifact-ready" and host["detail"].endswith("(on the host), tiny checkpoint qwen3-tiny"), host
    assert host["checkpoint"]["full_size"] is False and "MiB of files vs the family's 0.59 GiB" in host["checkpoint"]["why"]
    assert host["qualification"] == {"functional": False, "performance": False}
    blocked = cells[("x-elite", "qwen3-tts")]
    assert blocked["status"] == "blocked" and blocked["detail"] == "executorch-qnn: QNN ABI mismatch"
    assert blocked["failure"]["layer"] == "executorch-qnn" and blocked["failure"]["evidence"][0].endswith("failure.log")
    assert blocked["failure"]["next"]  # the next experiment is named
    page = tmp_path / "m.html"
    assert cli("matrix", "--html", str(page), "--store", str(tmp_path)).returncode == 0
    assert "tiny checkpoint qwen3-tiny" in page.read_text() and "next: rerun the record" in page.read_text()
    # Evidence is hashed: editing it after the fact makes the store refuse to render.
    evidence = next((tmp_path / "evidence").rglob("failure.log"))
    evidence.write_text("edited\n")
    bad = cli("matrix", "--store", str(tmp_path))
    assert bad.returncode == 1 and "missing or changed" in bad.stderr
    with pytest.raises(matrix.RecordError, match="needs the failure log"):
        matrix.record_blocked(tmp_path, "x-elite", "spark", "x", "y", tmp_path / "absent.log", "")


def test_qualified_needs_the_routes_own_device_and_passing_quality(tiny_artifact: Path, tmp_path: Path) -> None:
    component = tiny_artifact / "thinker-onnx"
    groups = {"concurrency-1": {"requests": 20}}

    def profile(name: str, device: dict) -> Path:
        path = tmp_path / name
        path.write_text(json.dumps({"device": device, "placement": [], "ledger": {}, "memory": {},
                                    "startup": {}, "groups": groups}))
        return path

    record = ["matrix", "record", "--store", str(tmp_path / "store"), "--route", "galaxy-s25", "--family", "spark",
              "--artifact", str(component), "--execution", "device"]
    no_profile = cli(*record)
    assert no_profile.returncode == 1 and "needs --profile-report" in no_profile.stderr
    host = cli(*record, "--profile-report", str(profile("host.json", {"serial": "host", "soc": None})))
    assert host.returncode == 1 and "not on the route's SM8750" in host.stderr
    wrong_htp = cli(*record, "--profile-report", str(profile("s24.json", {"serial": "R5", "soc": "SM8650",
                                                                            "htp_arch": "v75"})))
    assert wrong_htp.returncode == 1, wrong_htp.stderr
    phone = cli(*record, "--profile-report", str(profile("s25.json", {"serial": "R3", "soc": "SM8750",
                                                                        "htp_arch": "v79"})))
    assert phone.returncode == 0, phone.stderr
    not_qnn = cli("matrix", "record", "--store", str(tmp_path / "store"), "--route", "x-elite", "--family", "spark",
                  "--artifact", str(component), "--execution", "htp-emulator")
    assert not_qnn.returncode == 1 and "not a QNN artifact" in not_qnn.stderr
    cells = {(c["route"], c["family"]): c
             for c in json.loads(cli("matrix", "--json", "--store", str(tmp_path / "store")).stdout)}
    # On the route's own phone with n=20, but a tiny checkpoint: profiled, not qualified for the family.
    s25 = cells[("galaxy-s25", "spark")]
    assert s25["status"] == "profiled" and s25["detail"].endswith("profiled on R3, n=20, tiny checkpoint qwen3-tiny"), s25
    assert s25["qualification"] == {"functional": False, "performance": False}
    # The same record with the family's real size qualifies it: both fields, and the stage.
    (record,) = (tmp_path / "store" / "records").glob("*.json")
    full = {**json.loads(record.read_text()), "_id": "full"}
    full["artifact"] = {**full["artifact"], "bytes": 700 << 20}
    cell = matrix.cell_status(matrix.route("galaxy-s25"), matrix.family("spark"), [full])
    assert cell.status == "qualified" and (cell.functional, cell.performance) == (True, True), cell
    assert cell.detail.endswith("qualified on R3, n=20")
    on_emulator = {**full, "execution": "htp-emulator"}
    cell = matrix.cell_status(matrix.route("galaxy-s25"), matrix.family("spark"), [on_emulator])
    assert cell.status == "correct" and "emulated numerics" in cell.detail and not cell.functional

    # A record that ran but whose quality reports failed blocks the cell at the quality layer.
    (path,) = (tmp_path / "store" / "records").glob("*.json")
    ran_badly = {**json.loads(path.read_text()), "_id": "x", "quality": {"qualified": False}}
    cell = matrix.cell_status(matrix.route("galaxy-s25"), matrix.family("spark"), [ran_badly])
    assert cell.status == "blocked" and cell.detail.startswith("quality:")


def test_sensor_readings_of_a_phone_are_parsed_with_their_units() -> None:
    from omni_edge.harness.devices.sensors import coverage, parse_sensors, sensor_script

    script, marker = sensor_script()
    assert marker in script and "dumpsys battery" in script and "scaling_cur_freq" in script
    text = "\n".join([
        f"{marker}cpufreq", "cpu0/cpufreq/scaling_cur_freq 1785600", "cpu7/cpufreq/scaling_cur_freq 3302400",
        f"{marker}cpuinfo",
        f"{marker}thermal", "thermal_zone0 41200 cpu-0-0", "thermal_zone1 38500 gpu", "thermal_zone2 39000 gpu",
        f"{marker}power", "battery -412000 4012000",
        f"{marker}battery", "Current Battery Service state:", "  level: 87", "  voltage: 4011", "  temperature: 301",
    ])
    s = parse_sensors(text, marker, 2.0)
    assert s.cpu_source == "cpufreq" and s.cpu_mhz == {"cpu0": 1785.6, "cpu7": 3302.4}
    assert s.thermal_c == {"cpu-0-0": 41.2, "gpu": 38.5, "gpu (thermal_zone2)": 39.0}
    assert s.battery == {"current_ma": -412.0, "voltage_v": 4.012, "level": 87.0, "temperature_c": 30.1}
    covers = coverage([s])
    assert "never the NPU's" in covers["battery"] and covers["cpu_mhz"].startswith("each CPU's current clock")
    vm = parse_sensors(f"{marker}cpufreq\n{marker}cpuinfo\ncpu MHz\t\t: 2600.000\n", marker, 0.0)
    assert vm.cpu_source == "cpuinfo" and vm.cpu_mhz == {"cpu0": 2600.0} and not vm.thermal_c and not vm.battery
    assert parse_sensors("garbage\n", marker, 0.0).to_dict()["cpu_mhz"] == {}


def test_stream_faults_name_what_breaks_the_output_contract() -> None:
    from omni_edge.harness.profiling.process import ProcessRun
    from omni_edge.harness.profiling.reliability import stream_faults

    def run(*events: dict) -> ProcessRun:
        r = ProcessRun("g", 0)
        r.lines = [(0.1 * i, e) for i, e in enumerate(events)]
        return r

    token = {"kind": "token", "seq": 1}
    assert stream_faults(run(token, {"kind": "token", "seq": 2}, {"kind": "done", "seq": 3}), "text") == []
    assert stream_faults(run({"kind": "stop"}, {"kind": "cancelled", "seq": 0}), "text") == []
    assert stream_faults(run(token, token, {"kind": "done", "seq": 2}), "text") == [
        "text: seq 1 after 1 (stale or duplicate)"]
    assert stream_faults(run(token, {"kind": "done", "seq": 2}, {"kind": "token", "seq": 3}), "text") == [
        "text: token after its terminal line"]
    assert stream_faults(run(token), "text") == ["text: 0 terminal lines"]
    omni = run({"stream": "text", "kind": "done", "seq": 1}, {"stream": "audio", "kind": "pcm", "seq": 1})
    assert stream_faults(omni, "omni") == ["audio: 0 terminal lines"]


def test_profile_serving_refuses_a_policy_plan_before_deploying(policy_plan: Path, tmp_path: Path) -> None:
    done = cli("profile", "--device", "host", "--workdir", str(tmp_path / "device"), "--plan", str(policy_plan),
               "--serving", "--out", str(tmp_path / "profile"))
    assert done.returncode == 1 and "--serving sends text, speech and omni workloads; a policy plan's" in done.stderr
    assert not (tmp_path / "device").exists()  # nothing deployed


def test_minicpmo45_is_admitted_by_precision_as_the_readme_table_says() -> None:
    """The ledger on MiniCPM-o 4.5's sizes (its Qwen3-8B thinker at each precision, the other
    stages at fp16, KV for 8K positions): which routes can hold it (README, the MiniCPM-o section)."""
    from omni_edge.harness.qualification.catalog import THINKER_BITS, minicpmo45
    from omni_edge.harness.qualification.matrix import admission_by_precision

    table = admission_by_precision({name: minicpmo45(bits) for name, bits in THINKER_BITS.items()})
    admitted = {route: [p for p, (ok, _, _) in row.items() if ok] for route, row in table.items()}
    for phone in ("galaxy-s25", "galaxy-s24", "rb3-gen2", "cpu-nvidia-wsl", "cpu-nvidia-windows"):
        assert admitted[phone] == [], phone
    assert admitted["sa8775p-adp"] == ["fp16", "int8", "int4"]
    assert admitted["x-elite"] == admitted["cpu-windows"] == ["int8", "int4"]
    assert admitted["cpu-wsl"] == ["int4"]
    need = {p: round(table["x-elite"][p][1]) for p in THINKER_BITS}
    assert need == {"fp16": 24853, "int8": 16799, "int4": 12503}  # MiB: weights, KV, loading peak, workspace, margin
