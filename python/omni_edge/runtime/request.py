"""One request to a session, whatever its plan: the Python side of the native request schema
(controller_cpp/pipeline/request.h, `_native.request_schema()`); a test checks that the two list
the same fields with the same defaults."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

# Below this temperature a draw is greedy: a tinier one overflows logits / temperature to inf.
# The native sampler uses the same bound (decoding::kGreedyBelow).
GREEDY_BELOW = 1e-5


@dataclass(frozen=True)
class Sampling:
    """How a stream picks ids: greedy at temperature 0 (below GREEDY_BELOW), else temperature -> top-k -> top-p ->
    min-p -> a seeded draw; the repetition penalty first (for a talker: codebook 0 only)."""

    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    seed: int = 0

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def of(cls, value: Sampling | dict[str, Any] | None) -> Sampling | None:
        """A Sampling from itself or a dict of its fields (an unknown field is a TypeError)."""
        return value if value is None or isinstance(value, Sampling) else cls(**value)


@dataclass(frozen=True)
class ChatMessage:
    """One turn of a conversation given whole (an OpenAI-style message list)."""

    role: str  # "system" (first only) | "user" | "assistant"
    content: str

    @classmethod
    def of(cls, value: ChatMessage | tuple[str, str] | dict[str, str]) -> ChatMessage:
        """From itself, a (role, content) pair or a {"role", "content"} dict."""
        if isinstance(value, ChatMessage):
            return value
        if isinstance(value, dict):
            return cls(value["role"], value["content"])
        role, content = value
        return cls(role, content)


@dataclass(frozen=True)
class Media:
    """An image or audio item of a multimodal prompt (a file the session reads)."""

    kind: str  # "image" | "audio"
    path: str

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "path": self.path}


@dataclass(frozen=True)
class CameraImage:
    """One camera's image of an observation (a file the session reads)."""

    camera: str
    path: str

    def to_json(self) -> dict[str, Any]:
        return {"camera": self.camera, "path": self.path}


@dataclass(frozen=True)
class Observation:
    """What a policy plan acts on: camera images by name, the robot state, the capture time
    (milliseconds since the Unix epoch), and optionally the flow's initial noise
    [chunk, action_dim] (to compare with a reference; else drawn from noise_seed)."""

    timestamp_ms: float = -1.0
    images: tuple[CameraImage, ...] = ()
    state: tuple[float, ...] = ()
    noise: tuple[tuple[float, ...], ...] = ()
    noise_seed: int = 0
    reset_history: bool = False  # a policy with a frame history starts it again (a new episode)

    def to_json(self) -> dict[str, Any]:
        return {"timestamp_ms": self.timestamp_ms, "images": [i.to_json() for i in self.images],
                "state": list(self.state), "noise": [list(row) for row in self.noise], "noise_seed": self.noise_seed,
                "reset_history": self.reset_history}


@dataclass(frozen=True)
class Request:
    """The entry stage's input (a prompt to answer or speak, or exact token ids) and how each
    stream is generated. None sampling: the plan's."""

    prompt: str = ""
    chat: bool = False
    system_prompt: str = ""
    prompt_ids: tuple[int, ...] = ()
    # Or a whole conversation in the plan's chat format, ending with a user turn (chat implied).
    messages: tuple[ChatMessage, ...] = ()
    media: tuple[Media, ...] = ()  # before the text, in this order (a multimodal plan's encoders)
    continue_conversation: bool = False
    max_new_tokens: int = 0
    sampling: Sampling | None = None
    stop_strings: tuple[str, ...] = ()
    ignore_stop_tokens: bool = False
    max_frames: int = 0
    speech_sampling: Sampling | None = None
    prebuffer_ms: float = -1.0
    observation: Observation | None = None  # a policy plan's input; the prompt is its task
    deadline_ms: float = 0.0  # the action is due this long after the observation's capture (0: none)

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["observation"] = None if self.observation is None else self.observation.to_json()
        out["prompt_ids"] = list(self.prompt_ids)
        out["messages"] = [dataclasses.asdict(m) for m in self.messages]
        out["media"] = [m.to_json() for m in self.media]
        out["stop_strings"] = list(self.stop_strings)
        return out
