"""What the profiling protocol measures per plan kind: text, speech, omni (text + speech).

The kind follows from the plan's final outputs. A speech request's audio stream is `pcm` lines
then one terminal line whose fields come from the controller's own playback clock (started when
the declared prebuffer is queued): first playable PCM, playback start, deficits (underruns) and
their duration, RTF, the tail after the input ended, the talker's time per frame and the vocoder's
time. The harness adds what only the reader sees: the arrival gaps between chunks at the pipe,
and the audio delivered against the playback clock along the request (the plot).
An omni request has both streams; its handoff is the thinker's first token to the first PCM.
A multimodal plan (encoder stages before the thinker) is profiled with an image and audio: each
encoder's preprocessing and graph time, how long the thinker waited for their rows and how many
bytes crossed, the time from the rows to the first token (the rest of the chain), and the audio
encoder's tokens per second of audio (its alignment with the audio's timeline).
A policy plan (its final output an "action" chunk) is profiled with an observation restamped at
each request (a camera `capture_age_ms` behind): preprocessing, vision, prefix, the denoising
steps and the whole request on the controller's clock, the observation's age at start and at
emission, and the deadline: how often it was missed and by how much.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TEXT, SPEECH, OMNI, POLICY = "text", "speech", "omni", "policy"

_PARAGRAPH = ("The module provides a small set of tools for working with text, files and numbers. "
              "Each function documents its arguments, what it returns and which errors it raises. ")
_SPOKEN = ("Good morning. The train to the coast leaves at nine from platform four, and the next one an hour "
           "later. Tickets are sold at the counter and on board. ")


@dataclass(frozen=True)
class Workload:
    name: str
    prompt: str           # the prompt (text, omni) or the text to speak (speech)
    max_new_tokens: int   # text and omni
    max_frames: int = 0   # speech and omni: frames spoken at most (0: the plan's limit)
    media: tuple[tuple[str, str], ...] = ()  # a multimodal plan's ("image" | "audio", path on the target), in order
    observation: str = ""  # a policy plan's OBS.json on the target
    deadline_ms: float = 0.0  # policy: the action is due this long after the capture
    capture_age_ms: float = 0.0  # policy: each request's observation is stamped this long before it starts


WORKLOADS: dict[str, dict[str, Workload]] = {
    TEXT: {"short": Workload("short", "The module provides", 32),
           "medium": Workload("medium", _PARAGRAPH * 3 + "In short,", 96),
           "long": Workload("long", _PARAGRAPH * 8 + "To summarize,", 160)},
    SPEECH: {"short": Workload("short", "Good morning.", 0, 24),
             "medium": Workload("medium", _SPOKEN, 0, 64),
             "long": Workload("long", _SPOKEN * 3, 0, 160)},
    OMNI: {"short": Workload("short", "Say good morning.", 16, 24),
           "medium": Workload("medium", _PARAGRAPH + "Say it in a sentence.", 48, 64),
           "long": Workload("long", _PARAGRAPH * 3 + "Say it in a few sentences.", 96, 160)},
    # The task text's length varies; the deadline is a 20 Hz control loop's (50 ms) and looser.
    POLICY: {"short": Workload("short", "pick up the red block", 0, deadline_ms=50.0),
             "medium": Workload("medium", "pick up the red block and put it in the blue bowl on the left", 0,
                                deadline_ms=100.0),
             "long": Workload("long", "pick up the red block, put it in the blue bowl on the left, then close the "
                                      "drawer and return to the start", 0, deadline_ms=200.0, capture_age_ms=20.0)},
}

# The audio terminal's fields the report summarizes (the controller's clock), and the text's.
SPEECH_FIELDS = ("first_pcm_ms", "playback_start_ms", "rtf", "underruns", "underrun_ms", "lead_min_ms", "tail_ms",
                 "total_ms", "audio_ms", "talker_ms_per_frame", "vocoder_ms", "prebuffer_ms", "chunk_schedule")
TEXT_FIELDS = ("ttft_ms", "total_ms", "decode_tok_s", "prefill_tok_s", "n_prompt_tokens", "n_generated_tokens",
               "peak_rss_mb")
TERMINAL_KINDS = ("done", "cancelled", "error", "action")  # `act --json` ends with the action in place of "done"
POLICY_FIELDS = ("preprocess_ms", "vision_ms", "prefix_ms", "denoise_ms", "step_ms_mean", "total_ms",
                 "age_at_start_ms", "age_at_emission_ms", "deadline_missed", "lateness_ms")


def plan_kind(plan_path: Path) -> str:
    """text, speech or omni, from the final outputs a plan's stages declare."""
    try:
        stages = json.loads(plan_path.read_text())["stages"]
        finals = {s.get("final_output_type") for s in stages if s.get("final_output")}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"{plan_path}: not a readable plan ({exc})") from None
    if "audio" in finals:
        return OMNI if "text" in finals else SPEECH
    return POLICY if "action" in finals else TEXT


def write_observation(directory: Path, plan_path: Path, prompt: str = "") -> Path:
    """The profile's observation for a policy plan: a noise image per camera of the plan (a 4:3
    frame, resized with padding on the way), the state and the task, in OBS.json beside them (its
    timestamp is replaced at every request: `act --capture-age-ms`)."""
    import numpy as np
    from PIL import Image

    from omni_edge.files import atomic_output, write_text_atomic

    section = json.loads(plan_path.read_text())["stages"][0]["policy"]
    rng = np.random.default_rng(0)
    images = {}
    directory.mkdir(parents=True, exist_ok=True)
    for camera in section["cameras"]:
        with atomic_output(directory / f"{camera}.png") as part:
            Image.fromarray(rng.integers(0, 256, (480, 640, 3), dtype=np.uint8)).save(part, format="PNG")
        images[camera] = f"{camera}.png"
    obs = directory / "observation.json"
    write_text_atomic(obs, json.dumps({"timestamp_ms": 0, "images": images,
                                       "state": [round(float(v), 4) for v in rng.standard_normal(section["state_dim"])],
                                       "prompt": prompt}) + "\n")
    return obs


def plan_media(plan_path: Path) -> list[str]:
    """The media a plan's encoder stages read ("image", "audio"); empty for a text-only thinker."""
    stages = json.loads(plan_path.read_text())["stages"]
    return [s["encoder"]["modality"] for s in stages if isinstance(s.get("encoder"), dict)]


def plan_image_grids(plan_path: Path) -> list[list[int]]:
    """The image patch grids (t, h, w) a plan's vision encoder has graphs for."""
    stages = json.loads(plan_path.read_text())["stages"]
    return [[int(v) for v in key.split("x")] for s in stages if s.get("encoder", {}).get("modality") == "image"
            for key in s["graphs"]["encoder"]["graphs"]]


def write_media(directory: Path, modalities: list[str], grid: list[int] | None, patch: int = 14,
                seconds: float = 4.0) -> list[tuple[str, Path]]:
    """The profile's media for a multimodal plan: noise at the size of its first image grid (no
    resampling) and `seconds` of a 24 kHz chirp (resampled to the encoder's rate on the way).
    Each file is written whole or not at all."""
    import numpy as np
    from PIL import Image

    from omni_edge.files import atomic_output
    from omni_edge.runtime.media import wav_bytes

    out: list[tuple[str, Path]] = []
    if "image" in modalities and grid:
        image = directory / "image.png"
        pixels = np.random.default_rng(0).integers(0, 256, (grid[1] * patch, grid[2] * patch, 3), dtype=np.uint8)
        with atomic_output(image) as part:
            Image.fromarray(pixels).save(part, format="PNG")
        out.append(("image", image))
    if "audio" in modalities:
        audio = directory / "audio.wav"
        t = np.arange(int(seconds * 24000)) / 24000
        with atomic_output(audio) as part:
            part.write_bytes(wav_bytes(0.4 * np.sin(2 * np.pi * (200 + 300 * t) * t), 24000))
        out.append(("audio", audio))
    return out


def streams_of(kind: str) -> tuple[str, ...]:
    return {TEXT: ("text",), SPEECH: ("audio",), OMNI: ("text", "audio"), POLICY: ("action",)}[kind]


def stream_of(event: dict[str, Any], kind: str) -> str:
    """The stream a line belongs to: omni lines carry it, the others have one stream."""
    return str(event.get("stream", streams_of(kind)[0]))


def run_argv(kind: str, binary: str, plan: str, workload: Workload, wav: str) -> list[str]:
    """omni-edge-run's command line for one workload of this kind (without --repeat/--threads)."""
    if kind == POLICY:
        argv = [binary, "act", "--plan", plan, "--observation", workload.observation, "--capture-age-ms",
                f"{workload.capture_age_ms:g}", "--deadline-ms", f"{workload.deadline_ms:g}"]
        return [*argv, "--json", "--profile"]
    if kind == SPEECH:  # speak does not reserve by default; the profile compares RSS with the ledger's budget
        argv = [binary, "speak", "--plan", plan, "--text", workload.prompt, "--out", wav, "--memory-pools", "auto"]
    else:
        argv = [binary, "--plan", plan, "--prompt", workload.prompt, "--max-new-tokens", str(workload.max_new_tokens),
                "--ignore-stop-tokens"]
        for modality, path in workload.media:
            argv += [f"--{modality}", path]
        if kind == OMNI:
            argv += ["--speak", wav]
    if kind != TEXT and workload.max_frames:
        argv += ["--max-frames", str(workload.max_frames)]
    return [*argv, "--json", "--profile"]


def is_first_output(event: dict[str, Any]) -> bool:
    return event.get("kind") in ("token", "pcm", "action")


def policy_row(lines: list[tuple[float, dict[str, Any]]], start: float) -> dict[str, Any] | None:
    """A policy request's row from its action line (timings and ages on the controller's clock)."""
    action = next((e for _, e in lines if e.get("kind") == "action"), None)
    if action is None:
        return None
    t, age = action.get("timings", {}), action.get("observation_age_ms", {})
    steps = [float(v) for v in t.get("step_ms", [])]
    done_t = max(tt for tt, e in lines if e.get("kind") == "action")
    return {"wall_ms": (done_t - start) * 1000, **{k: t.get(k) for k in ("preprocess_ms", "vision_ms", "prefix_ms",
                                                                          "denoise_ms", "total_ms")},
            "step_ms_mean": sum(steps) / len(steps) if steps else None, "step_ms": steps,
            "age_at_start_ms": age.get("at_start"), "age_at_emission_ms": age.get("at_emission"),
            "deadline_missed": 1.0 if action.get("deadline_missed") else 0.0, "lateness_ms": action.get("lateness_ms")}


def request_row(kind: str, lines: list[tuple[float, dict[str, Any]]], start: float) -> dict[str, Any] | None:
    """One request's measured row, or None unless every stream finished ("done")."""
    if kind == POLICY:
        return policy_row(lines, start)
    terminals = {stream_of(e, kind): e for _, e in lines if e.get("kind") in TERMINAL_KINDS}
    if any(terminals.get(s, {}).get("kind") != "done" for s in streams_of(kind)):
        return None
    done_t = max(t for t, e in lines if e.get("kind") in TERMINAL_KINDS)
    row: dict[str, Any] = {"wall_ms": (done_t - start) * 1000}
    if "text" in terminals:
        row |= {k: terminals["text"].get(k) for k in TEXT_FIELDS}
        media = terminals["text"].get("media") or {}
        if media.get("items"):  # the multimodal dimensions: each encoder, the handoff, the rest of the chain
            row |= {"media_wait_ms": media.get("wait_ms"), "media_tokens": media.get("tokens"),
                    "media_bytes": media.get("bytes_received")}
            for modality in ("image", "audio"):
                for key in ("preprocess_ms", "encode_ms", "tokens_per_second"):
                    if key in media.get(modality, {}):
                        row[f"{modality}_{key}"] = media[modality][key]
            if row.get("ttft_ms") is not None and media.get("wait_ms") is not None:
                row["after_media_ttft_ms"] = float(row["ttft_ms"]) - float(media["wait_ms"])
        tokens = [t for t, e in lines if e.get("kind") == "token"]
        row["token_intervals_ms"] = [(b - a) * 1000 for a, b in itertools.pairwise(tokens)]
    if "audio" in terminals:
        audio = terminals["audio"]
        row |= {f"audio_{k}" if k == "total_ms" else k: audio.get(k) for k in SPEECH_FIELDS}
        pcm = [(t, e) for t, e in lines if e.get("kind") == "pcm"]
        rate = float(audio.get("sample_rate") or 1)
        row["chunk_gaps_ms"] = [(b - a) * 1000 for (a, _), (b, _) in itertools.pairwise(pcm)]
        # Audio delivered (ms) against the harness's clock (ms since the request started).
        delivered, arrivals = 0.0, []
        for t, e in pcm:
            delivered += 1000.0 * float(e.get("n_samples", 0)) / rate
            arrivals.append([round((t - start) * 1000, 3), round(delivered, 3)])
        row["pcm_arrivals"] = arrivals
        if "text" in terminals and audio.get("first_pcm_ms") is not None and row.get("ttft_ms") is not None:
            row["handoff_ms"] = float(audio["first_pcm_ms"]) - float(row["ttft_ms"])
    if "total_ms" not in row:
        row["total_ms"] = row.get("audio_total_ms")
    return row


MEDIA_METRICS = ("media_wait_ms", "after_media_ttft_ms", "media_tokens", "media_bytes", "image_preprocess_ms",
                 "image_encode_ms", "audio_preprocess_ms", "audio_encode_ms", "audio_tokens_per_second")


def metric_names(kind: str, media: bool = False) -> list[str]:
    if kind == POLICY:
        return ["wall_ms", *POLICY_FIELDS]
    names = ["wall_ms", *(MEDIA_METRICS if media else ())]
    if kind != SPEECH:
        names += ["ttft_ms", "total_ms", "decode_tok_s", "prefill_tok_s"]
    if kind != TEXT:
        names += ["first_pcm_ms", "playback_start_ms", "rtf", "underruns", "underrun_ms", "lead_min_ms", "tail_ms",
                  "talker_ms_per_frame", "vocoder_ms"]
    if kind == SPEECH:
        names += ["audio_total_ms"]
    if kind == OMNI:
        names += ["handoff_ms"]
    return names
