"""What a speech export is asked for, whatever the talker: the voice a release speaks with and the
stream shape of its chunked vocoder (chunk sizes, left context, the fixed window graphs, the
adaptive schedule). Shared by the speech families and the controller's vocoder stage."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Voice:
    """A release's prompt choices: a speaker of its spk_id, a language of its codec_language_id
    (or "auto"), an instruction (the 1.7B's), and whether the text streams in one token per
    frame (generate()'s non_streaming_mode=False) rather than all in the prompt."""

    speaker: str = ""
    language: str = "auto"
    instruct: str = ""
    stream_text: bool = False


@dataclass(frozen=True)
class StreamShape:
    """Chunks of `chunk` frames (the first one `first` frames), each decoded with up to
    `left_context` frames before it, in a window of fixed `window` frames (right-padded).

    `adaptive`: the controller's ChunkSchedule cuts chunks as the audio already sent allows
    (each at most `growth` times the previous one, at most `chunk`), so the chunk boundaries
    of a stream depend on the device's timing; the window graphs then cover every size on
    the way (powers of two) and the exact reference of a stream is decoded from the
    boundaries it reported (`frames_final` of its pcm events)."""

    first: int = 1
    chunk: int = 25
    left_context: int = 72
    adaptive: bool = True
    growth: float = 2.0
    margin_ms: float = 40.0

    @property
    def window(self) -> int:
        return self.left_context + max(self.chunk, self.first) + 1  # + 1: the frame that releases the tail

    @property
    def windows(self) -> tuple[int, ...]:
        """Window sizes to export: the full one, and one just big enough for the first chunk
        (it has no context), so the first PCM does not wait for a full window's compute; an
        adaptive schedule also gets the powers of two between, for the chunks it grows."""
        sizes = {self.first + 1, self.window}
        if self.adaptive:
            sizes |= {1 << k for k in range(1, self.window.bit_length()) if self.first + 1 < 1 << k < self.window}
        return tuple(sorted(sizes))

    def schedule(self) -> dict[str, Any]:
        """The plan's `vocoder.schedule` section."""
        if not self.adaptive:
            return {"policy": "fixed"}
        return {"policy": "adaptive", "growth": self.growth, "margin_ms": self.margin_ms}

    def __post_init__(self) -> None:
        if min(self.first, self.chunk, self.left_context) < 1:
            raise ValueError("chunk sizes and the left context must be at least 1 (a chunk's tail is "
                             "released from the next chunk's window)")

    def emitted(self, start: int, end: int, tail: int, final: bool, samples_per_frame: int) -> tuple[int, int, int]:
        """(context frames, first, last sample) of the window decoding frames [start, end): the
        window starts `context` frames before `start`; samples [first, last) of its output are
        the ones these frames make final (the tail only on the final chunk, released by a pad frame)."""
        ctx = min(self.left_context, start)
        first = ctx * samples_per_frame - (tail if start > 0 else 0)
        last = (ctx + end - start) * samples_per_frame - (0 if final else tail)
        return ctx, first, last

    def chunks(self, n_frames: int) -> list[tuple[int, int, bool]]:
        """(start, end, final) frame ranges in stream order, as a streaming vocoder meets them:
        each chunk as soon as its frames exist (the end of speech is not known yet), then, at the
        end, the frames left over (possibly none) with the tail flushed. Adaptive: the largest
        chunks the schedule allows (what it cuts while the audio sent keeps well ahead)."""
        out: list[tuple[int, int, bool]] = []
        start, size = 0, self.first
        while n_frames - start >= size:
            out.append((start, start + size, False))
            start += size
            size = min(self.chunk, max(1, int(self.growth * size))) if self.adaptive else self.chunk
        if n_frames > 0:
            out.append((start, n_frames, True))
        return out

    @staticmethod
    def chunks_ending(ends: Sequence[int]) -> list[tuple[int, int, bool]]:
        """The (start, end, final) ranges of a stream whose chunks ended at `ends` (its pcm
        events' `frames_final`, in order; the last one flushed the tail)."""
        starts = [0, *ends[:-1]]
        return [(s, e, i == len(ends) - 1) for i, (s, e) in enumerate(zip(starts, ends, strict=True))]
