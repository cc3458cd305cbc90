// The "token2wav" section of a code2wav stage that turns a talker's codes into PCM by flow
// matching and a HiFT vocoder (MiniCPM-o 4.5's Step-Audio2 token2wav, streamed as vLLM-Omni's
// bridge cuts it): windows of `context` carried codes and `window` new ones, `steps` Euler steps
// on the plan's time grid, HiFT over the last `mel_cache` frames and the new ones, cross-faded
// over `source_cache` samples. The voice prompt and the flow's fixed noise are artifact files.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/json_fields.h"
#include "runtime/plan.h"

namespace omni_edge::token2wav {

struct Token2WavConfig final : StageConfig {
  int64_t sample_rate = 24000, samples_per_frame = 480;  // per 50 Hz mel frame
  int64_t window = 25, context = 3, silence = 4218, vocab = 6561;
  int64_t mel_bins = 80, mel_cache = 8, source_cache = 3840, keep_recent = 100;
  std::vector<float> times;  // steps + 1 points of the Euler grid, 0 .. 1
  // Cache shapes with their frame axis (3) at 0.
  std::vector<int64_t> encoder_cnn, encoder_att, estimator_cnn, estimator_att;
  std::string noise;                          // absolute path of noise.json: [mel_bins, frames]
  std::map<std::string, std::string> voices;  // name -> absolute path of its .json
  std::string voice = "default";
  std::string pcm_dtype = "float32";
  uint64_t noise_seed = 0;  // HiFT's noise stream (counter_noise)

  int64_t steps() const { return int64_t(times.size()) - 1; }
  std::vector<std::string> files() const override;
};

Result<std::shared_ptr<const Token2WavConfig>> ParseToken2Wav(const Json& j, const StagePlan& stage,
                                                              const std::string& where);

}  // namespace omni_edge::token2wav
