// Mono 16-bit PCM as RIFF/WAVE bytes: the 44-byte header and the samples, for every writer of
// audio (files, HTTP bodies, base64 chunks). Float samples follow base/pcm.h's one rule.
#pragma once

#include <cstdint>
#include <string>

namespace omni_edge {

// The header of `n_samples` samples at `sample_rate`. A stream whose length is not known yet
// (an HTTP body sent as it is made) passes n_samples < 0: both sizes then read 0xFFFFFFFF, the
// convention players and Python's `wave` accept for "until the data ends".
std::string WavHeader(int64_t sample_rate, int64_t n_samples);

// Appends `n` samples of `dtype` ("int16" | "float32") to `out` as little-endian int16; false
// (nothing appended) for another dtype or n < 0.
bool AppendPcm16(const void* samples, int64_t n, const std::string& dtype, std::string* out);

}  // namespace omni_edge
