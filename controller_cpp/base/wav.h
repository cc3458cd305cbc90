// Mono 16-bit PCM as RIFF/WAVE bytes: the 44-byte header and the samples, for every writer of
// audio (files, HTTP bodies, base64 chunks). Float samples follow base/pcm.h's one rule.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace omni_edge {

// The header of `n_samples` samples at `sample_rate`. A stream whose length is not known yet
// (an HTTP body sent as it is made) passes n_samples < 0: both sizes then read 0xFFFFFFFF, the
// convention players and Python's `wave` accept for "until the data ends".
std::string WavHeader(int64_t sample_rate, int64_t n_samples);

// Appends `n` samples of `dtype` ("int16" | "float32") to `out` as little-endian int16; false
// (nothing appended) for another dtype or n < 0.
bool AppendPcm16(const void* samples, int64_t n, const std::string& dtype, std::string* out);

struct Pcm {
  int64_t rate = 0;
  std::vector<float> samples;  // mono, in [-1, 1]
};

// A RIFF/WAVE file: PCM 8/16/24/32-bit integer or 32/64-bit float (WAVE_FORMAT_EXTENSIBLE of
// those too), any channel count (averaged), at 1 kHz to 384 kHz. Anything else is refused by name.
Result<Pcm> DecodeWav(const std::string& bytes);

}  // namespace omni_edge
