// How a streaming vocoder cuts codes into windows: chunks of `chunk` frames (the first one
// `first_chunk`), each decoded in one fixed window of `window` frames that starts up to
// `left_context` frames before the chunk and is right-padded. The vocoder is causal with a
// constant delay of `tail_samples`: the last samples of a chunk only become final once a later
// frame exists, so a chunk emits up to its end minus the tail, and the end of speech flushes
// the tail with a window of zero new frames. Mirrors StreamShape in export/speech.py.
#pragma once

#include <algorithm>
#include <cstdint>

#include "families/vocoder/config.h"

namespace omni_edge::vocoder {

struct Emitted {
  int64_t context = 0;       // frames of the window before the chunk
  int64_t first_sample = 0;  // [first, last) of the window's output are the chunk's final samples
  int64_t last_sample = 0;
};

class StreamShape {
 public:
  explicit StreamShape(const VocoderConfig& c) : c_(c) {}

  // Frames a chunk starting at `start` waits for (unless speech ends first).
  int64_t ChunkFrames(int64_t start) const { return start == 0 ? c_.first_chunk : c_.chunk; }

  // Frames [start, end) of a stream; `final` when no frame follows (the tail is flushed).
  Emitted Emit(int64_t start, int64_t end, bool final) const {
    Emitted e;
    const int64_t f = c_.samples_per_frame, tail = c_.tail_samples;
    e.context = std::min(c_.left_context, start);
    e.first_sample = e.context * f - (start > 0 ? tail : 0);
    e.last_sample = (e.context + end - start) * f - (final ? 0 : tail);
    return e;
  }

 private:
  VocoderConfig c_;
};

}  // namespace omni_edge::vocoder
