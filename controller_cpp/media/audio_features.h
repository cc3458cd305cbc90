// Audio as a Whisper-style encoder reads it, computed on the device as transformers does it:
// a WAV file's PCM (integer or float samples, channels averaged), resampled to the feature
// extractor's rate by the reference's polyphase filter (scipy's resample_poly: a Kaiser-windowed
// sinc, beta 5, 10 zero crossings per side of the slower rate), then WhisperFeatureExtractor's
// log-mel spectrogram (centred periodic-Hann STFT with reflect padding, power spectrum, Slaney
// mel filters, log10 floored at 1e-10, clamped 8 below the maximum of the padded 30 s window,
// (x + 4) / 4).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/json_fields.h"
#include "base/status.h"
#include "base/wav.h"

namespace omni_edge::media {

// WAV decoding is base's (base/wav.h); encoders name it here.
using omni_edge::DecodeWav;
using omni_edge::Pcm;

// scipy.signal.resample_poly(x, target / g, rate / g) with g = gcd(rate, target).
Result<std::vector<float>> Resample(const std::vector<float>& x, int64_t rate, int64_t target);

struct AudioFeatureConfig {
  int64_t feature_size = 128, sampling_rate = 16000, hop_length = 160, n_fft = 400;
  int64_t n_samples = 480000;  // the window every audio is padded to (30 s)
};

// The audio fields of preprocessor_config.json (others ignored).
Result<AudioFeatureConfig> AudioFeaturesFromJson(const Json& config, const std::string& where);

struct LogMel {
  int64_t mel = 0, frames = 0;  // frames: the audio's (the attention mask's ones), not the padding's
  std::vector<float> values;    // mel rows of `frames` values
};

// Samples at the config's rate, at most n_samples of them.
Result<LogMel> WhisperLogMel(const std::vector<float>& samples, const AudioFeatureConfig& c);

// The whole front end: WAV bytes -> features at the config's rate.
Result<LogMel> AudioFeatures(const std::string& wav, const AudioFeatureConfig& c);

}  // namespace omni_edge::media
