"""omni-edge native controller core (stage contract v2)"""

from collections.abc import Callable, Sequence


PROTOCOL_VERSION: int = 2

def negotiate(args_json: str) -> list[str]:
    """
    Negotiate {protocol_version, required_features}; returns the offered features.
    """

def canonical_json(type_name: str, json_text: str) -> str: ...

def read_manifest(directory: str) -> str: ...

def available_backends() -> list[str]: ...

def onnxruntime_process_threads() -> int:
    """
    ONNX Runtime's shared intra-op pool in this process (its first session sized it); 0 before one.
    """

def report_mapped_file_faults(lines: str) -> None: ...

def playback_stats(arrivals: Sequence[tuple[float, int]], sample_rate: int, prebuffer_ms: float) -> str:
    """
    The speech session's playback clock over (ms since the request, samples) arrivals (JSON stats).
    """

def preprocess_image(pixels: bytes, width: int, height: int, config_json: str) -> tuple[bytes, int, int, int]:
    """
    An 8-bit RGB image (rows of interleaved pixels) as a Qwen2-VL vision encoder reads it: (float32 patches, grid_t, grid_h, grid_w).
    """

def slice_image(pixels: bytes, width: int, height: int, config_json: str) -> tuple[int, int, list[tuple[int, int, bytes]]]:
    """
    An 8-bit RGB image as MiniCPM-V / MiniCPM-o 4.5 slice it: (grid cols, grid rows (0, 0: not cut), [(rows, cols, float32 strip [3, patch, rows*cols*patch])] source first).
    """

def policy_pixels(pixels: bytes, width: int, height: int, size: int, mean: Sequence[float], std: Sequence[float]) -> bytes:
    """
    An 8-bit RGB image as a π0 policy reads a camera: float32 [3, size, size], resized with padding, normalized.
    """

def decode_wav(wav: bytes) -> tuple[bytes, int]:
    """A WAV file's samples (float32 mono, channels averaged) and rate."""

def resample(samples: bytes, rate: int, target: int) -> bytes:
    """float32 samples resampled as scipy's resample_poly does."""

def audio_features(wav: bytes, config_json: str) -> tuple[bytes, int, int]:
    """
    A WAV file as a Whisper-style encoder reads it: (float32 log-mel [mel, frames], mel, frames).
    """

def mrope_positions(prompt: Sequence[int], thinker_config_json: str, image_grids: Sequence[tuple[int, int, int]]) -> tuple[list[list[int]], int]:
    """
    The three M-RoPE position rows of a prompt (images' grids in order, in patches) and the next position.
    """

def plan_budget(plan_path: str, sessions: int = 1, wsl: bool = False) -> str:
    """
    The memory budget of a plan per stage and pool (JSON), from its manifests; loads nothing.
    """

def decoder_memory(decoder_json: str) -> str:
    """
    A decoder section's resident KV state and prefill workspace in bytes (JSON).
    """

def detect_pools() -> str: ...

class AdmissionLedger:
    def __init__(self, pools_json: str) -> None: ...

    def reserve(self, owner: str, demand_json: str) -> int:
        """All-or-nothing; raises ContractError('admission') with the numbers."""

    def release(self, reservation: int, drained: bool = True) -> None: ...

    def forgive(self, reservation: int) -> None: ...

    def free(self, pool: str) -> int: ...

    def snapshot(self) -> str: ...

class Tokenizer:
    @staticmethod
    def load(path: str) -> Tokenizer: ...

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]: ...

    def decode(self, ids: Sequence[int], skip_special: bool = True) -> bytes: ...

    def find(self, token: str) -> int | None: ...

    def stream(self, ids: Sequence[int]) -> list[str]: ...

    @property
    def vocab_size(self) -> int: ...

class LlmEngine:
    @staticmethod
    def open(plan_path: str, threads: int = 0) -> LlmEngine: ...

    def feed(self, ids: Sequence[int], splice_rows: bytes = ..., splice_positions: Sequence[int] = []) -> bytes:
        """
        Feed tokens (the embeddings at splice_positions replaced by splice_rows, float32 [n, hidden]); returns the last token's logits as float32 bytes.
        """

    def set_position_table(self, rows: Sequence[Sequence[int]], next_position: int) -> None:
        """M-RoPE: the position rows of the prompt and the position after it."""

    def reset(self) -> None: ...

    def rewind(self, position: int, context: Sequence[int]) -> None:
        """
        Forget the positions from `position` on (context: every position's token).
        """

    def recurrent_state(self) -> bytes:
        """
        A hybrid's conv and recurrent states as float32 bytes (every layer's conv state, then every recurrent state).
        """

    @property
    def last_rewind(self) -> str: ...

    def capture(self, max_per_graph: int) -> None:
        """Capture the inputs of every graph run (0 stops)."""

    def take_capture(self) -> dict[str, list[list[tuple[bytes, str, list[int]]]]]: ...

    @property
    def position(self) -> int: ...

    @property
    def cache_slots(self) -> int: ...

    @property
    def vocab_size(self) -> int: ...

    def placements(self) -> list[dict[str, str | int]]: ...

class Token2WavEngine:
    @staticmethod
    def open(plan_path: str, threads: int = 0) -> Token2WavEngine: ...

    def start(self, seed: int) -> None:
        """
        Forget the last utterance: the caches after the voice prompt; HiFT's noise from seed.
        """

    def decode(self, codes: Sequence[int], last: bool) -> bytes:
        """One window (carried codes, then new ones): its float32 samples."""

    def placements(self) -> list[dict[str, str | int]]: ...

def request_schema() -> str:
    """Every field a session request may carry, with its default (JSON)."""

class Session:
    @staticmethod
    def open(plan_path: str, allow_unqualified: bool = False, threads: int = 0) -> Session:
        """
        Any plan: verifies its artifacts, admits its memory budget, loads every stage.
        """

    def submit(self, request_json: str, on_event: Callable[[str, str, bytes | None], object]) -> str:
        """
        Run one request; on_event(stream, event_json, payload) sees every event, one at a time, and may return False to cancel. Returns each stream's terminal fields (JSON).
        """

    def cancel(self) -> None: ...

    def abort(self) -> None: ...

    def reset(self) -> None: ...

    def info(self) -> str: ...

    def tokenize(self, arg: str, /) -> list[int]: ...

    @property
    def epoch(self) -> int: ...

    def placements(self) -> list[dict[str, str | int]]: ...

class LatestQueue:
    def __init__(self, session: Session) -> None:
        """
        A mailbox in front of a session: a posted request still waiting when a newer one is posted is superseded.
        """

    def post(self, request_json: str, on_event: Callable[[str, str, bytes | None], object] | None, on_done: Callable[[str | None, str | None, str | None], object] | None) -> None:
        """
        Queue a request; on_event(stream, event_json, payload) and then on_done(terminal_json, None, None) or on_done(None, reason, message) run on the queue's thread (reason 'superseded': it never ran).
        """

    def counters(self) -> str: ...

    def close(self) -> None:
        """Supersede the waiting request and wait for the running one to end."""

class EventStream:
    def __init__(self, request_json: str, max_events: int, max_bytes: int) -> None: ...

    def try_submit(self, event_json: str) -> str: ...

    def submit(self, event_json: str, timeout_s: float | None = None) -> None: ...

    def close(self) -> None: ...

    def try_receive(self) -> str | None: ...

    def receive(self, timeout_s: float | None = None) -> str | None: ...

    def acknowledge(self, token: str) -> bool: ...

    def cancel(self) -> int: ...

    def counters(self) -> dict[str, int | bool]: ...

class StageController:
    def __init__(self, identities_json: str) -> None: ...

    def begin(self, request_json: str, max_events: int, max_bytes: int) -> EventStream: ...

    def emit(self, request_json: str, event_json: str) -> str: ...

    def finish(self, request_json: str) -> None: ...

    def cancel(self, request_json: str) -> int: ...

    def request_release(self, stage_id: int, state_json: str) -> str: ...

    def confirm_release(self, stage_id: int, state_json: str, op_id: str) -> None: ...

    def is_live(self, stage_id: int, state_json: str) -> bool: ...
