"""One session for every plan kind, on the native stage runner and executor: the same open, the
same request schema in C++ and Python, the same admission refusal from both CLIs, and a slow
consumer that holds every producer of an omni pipeline back through credited streams."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from llm_reference import CLI, cli
from omni_edge import _native
from omni_edge.runtime import Session
from omni_edge.runtime.request import ChatMessage, Media, Request, Sampling

RUN = CLI.parent / "omni-edge-run"


def test_the_python_request_is_the_native_schema() -> None:
    native = json.loads(_native.request_schema())
    assert Request().to_json() == native
    assert set(Sampling().to_json()) == set(json.loads(_native.request_schema())["sampling"] or Sampling().to_json())
    # Every field round-trips through the native codec: a session takes what Python writes.
    full = Request(prompt="x", chat=True, system_prompt="s", prompt_ids=(1, 2), continue_conversation=False,
                   max_new_tokens=3, sampling=Sampling(temperature=0.5, top_k=4, top_p=0.9, min_p=0.1,
                                                       repetition_penalty=1.1, seed=9),
                   stop_strings=("a",), ignore_stop_tokens=True, max_frames=2,
                   speech_sampling=Sampling(seed=3), prebuffer_ms=0.0, media=(Media("image", "a.png"),),
                   messages=(ChatMessage("user", "hi"),))
    assert set(full.to_json()) == set(native)


def test_bad_requests_name_the_field(tiny_artifact: Path) -> None:
    from omni_edge.contracts import ContractError

    session = Session.open(tiny_artifact / "plan.json")
    for request, says in ((json.dumps({"prompt": "x", "max_frames": "2"}), "request.max_frames"),
                          (json.dumps({"prompt": "x", "colour": 1}), "request.colour: unknown field"),
                          (json.dumps({"prompt": "x", "sampling": {"top_k": -1}}), "request.sampling.top_k"),
                          (json.dumps({"prompt": "x", "prompt_ids": [2 ** 40]}), "request.prompt_ids[0]"),
                          (json.dumps({"prompt": "x", "media": [{"kind": "video", "path": "a"}]}), "request.media[0].kind"),
                          (json.dumps({"prompt": "x", "media": [{"kind": "image"}]}), "request.media[0].path"),
                          (json.dumps({"prompt": "x", "media": [{"kind": "image", "path": "a", "x": 1}]}),
                           "request.media[0].x: unknown field"),
                          (json.dumps({"messages": [{"role": "user"}]}), "request.messages[0].content"),
                          (json.dumps({"messages": [{"role": "tool", "content": "x"}]}),
                           "messages[0].role: must be system, user or assistant"),
                          (json.dumps({"messages": [{"role": "user", "content": "x"}, {"role": "system", "content": "s"}]}),
                           "messages[1].role: a system turn comes first only"),
                          (json.dumps({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]}),
                           "the last turn is the user's to answer"),
                          (json.dumps({"prompt": "x", "messages": [{"role": "user", "content": "x"}]}),
                           "messages are the whole conversation")):
        try:
            session._s.submit(request, lambda *a: True)
        except ContractError as exc:
            assert says in exc.message, exc.message
        else:
            raise AssertionError(f"accepted {request}")


def test_one_session_opens_every_plan_kind(tiny_artifact: Path, tts_artifact: Path) -> None:
    text = Session.open(tiny_artifact / "plan.json")
    speech = Session.open(tts_artifact)
    assert set(text.info()["streams"]) == {"text"} and set(speech.info()["streams"]) == {"audio"}
    assert speech.sample_rate == 24000 and [s["family"] for s in speech.info()["stages"]] == ["talker", "vocoder"]
    result = speech.submit(Request(prompt="Hello.", max_frames=3))
    assert result["audio"]["frames"] == 3 and result["audio"]["samples"] == 3 * 1920
    assert len(speech.codes()) == 3


def test_both_clis_refuse_an_over_budget_plan_alike(tiny_artifact: Path, tmp_path: Path) -> None:
    plan = json.loads((tiny_artifact / "plan.json").read_text())
    plan["memory_budget_mb"] = 1
    for stage in plan["stages"]:
        stage["artifact"] = str((tiny_artifact / stage["artifact"]).resolve())
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    python = cli("run", "--plan", str(path), "--prompt", "hi", "--max-new-tokens", "2")
    native = subprocess.run([str(RUN), "--plan", str(path), "--prompt", "hi", "--max-new-tokens", "2"],
                            capture_output=True, text=True, timeout=120)
    assert python.returncode == native.returncode == 1
    said = [r.stderr.strip().splitlines()[-1].split(": ", 1)[1] for r in (python, native)]
    assert said[0] == said[1] and said[0].startswith("admission: ") and "memory_budget_mb is 1" in said[0], said
