"""Image and audio content parts through the official `openai` client on a multimodal plan
(Qwen2.5-Omni's thinker with its vision and audio encoders): the reply equals `omni-edge-run`'s
with the same files given as --image and --audio, and media the plan cannot read are a 400 that
leaves the session serving."""

from __future__ import annotations

import base64
import json
import subprocess
import wave
from pathlib import Path
from typing import Any

import numpy as np
import openai
import pytest
from paths import RUN
from serving import client, serving

QUESTION = "What is this?"


def _media(d: Path) -> tuple[Path, Path]:
    """A 448x448 red square (256 image tokens) and a 2 s 440 Hz tone at 16 kHz."""
    from PIL import Image

    image, audio = d / "red.png", d / "tone.wav"
    Image.new("RGB", (448, 448), (255, 0, 0)).save(image)
    t = np.arange(32000) / 16000
    with wave.open(str(audio), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes((np.sin(2 * np.pi * 440 * t) * 12000).astype("<i2").tobytes())
    return image, audio


def test_image_and_audio_parts_equal_the_native_run(omni_artifact: Path, tmp_path: Path) -> None:
    image, audio = _media(tmp_path)
    plan = omni_artifact / "plan.json"
    done = subprocess.run([str(RUN), "run", "--plan", str(plan), "--image", str(image), "--audio", str(audio), "--prompt",
                           QUESTION, "--chat", "--max-new-tokens", "12", "--ignore-stop-tokens", "--temperature", "0",
                           "--threads", "1", "--json"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    events = [json.loads(line) for line in done.stdout.splitlines()]
    text = "".join(e.get("text", "") for e in events if e["kind"] == "token")
    parts: Any = [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(image.read_bytes()).decode()}},
        {"type": "input_audio", "input_audio": {"data": base64.b64encode(audio.read_bytes()).decode(), "format": "wav"}},
        {"type": "text", "text": QUESTION}]
    with serving(plan) as server:
        api, model = client(server), server["model"]
        [card] = api.models.list().data
        assert card.model_extra is not None and card.model_extra["input_modalities"] == ["text", "image", "audio"]
        reply = api.chat.completions.create(model=model, messages=[{"role": "user", "content": parts}], max_tokens=12,
                                            temperature=0, extra_body={"ignore_eos": True})
        assert reply.choices[0].message.content == text
        assert reply.usage is not None and reply.usage.prompt_tokens == events[-1]["n_prompt_tokens"]
        broken: Any = [{"type": "image_url", "image_url": {"url": "data:image/png;base64," +
                                                          base64.b64encode(b"\x89PNG not really").decode()}}, parts[2]]
        with pytest.raises(openai.BadRequestError) as bad:
            api.chat.completions.create(model=model, messages=[{"role": "user", "content": broken}], max_tokens=2)
        assert "media[0]" in bad.value.message, bad.value.message
        again = api.chat.completions.create(model=model, messages=[{"role": "user", "content": parts}], max_tokens=12,
                                            temperature=0, extra_body={"ignore_eos": True})
        assert again.choices[0].message.content == text
