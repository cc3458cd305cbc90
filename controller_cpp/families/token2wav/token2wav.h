// MiniCPM-o 4.5's token2wav on the controller: codes -> 24 kHz PCM, one bridge window at a time,
// through four graphs (export/models/minicpmo45/token2wav_graphs.py):
//   encoder / encoder last  codes [1, n], caches -> mu [1, mel, 2 (n - context)] (last: 2n), caches
//   estimator               one Euler step: x, mu, t, speaker, cond, the step's caches -> velocity
//   hift                    mel [1, mel, T], phase0, noise, the source tail, keep -> speech, source
// Start() runs the voice prompt through the encoder and the flow (its mel as the condition) and
// keeps the caches it leaves: one per Euler step for the estimator. Each window's mel starts
// from the flow's fixed noise at the cache's length; caches are cut back to the prompt's frames
// and the last keep_recent after each window; HiFT reads the last mel_cache frames before the
// new ones, its source's first samples are the last window's, its first source_cache samples
// are cross-faded (Hamming) with the last window's tail, which a non-last window holds back.
// Optional groups steady_encoder / steady_estimator: the same two graphs at a whole window's
// static shapes (the HTP's), keyed by the frames their caches hold (the voice prompt's, growing
// by 2 x window until trimming holds them): context + window codes, the step's time as its
// sinusoidal features [1, K] computed here in double. Every window with those shapes runs them;
// the prompt and the last window run the dynamic graphs.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "families/token2wav/config.h"
#include "runtime/backend_pool.h"
#include "runtime/graph.h"
#include "runtime/plan.h"

namespace omni_edge::token2wav {

class Token2Wav {
 public:
  static Result<std::unique_ptr<Token2Wav>> Create(const StagePlan& stage, BackendPool& backends);

  // Forgets the last utterance: the caches after the voice prompt (computed by the first Start,
  // then copied: the voice is the artifact's, fixed); HiFT's noise from `seed`.
  Status Start(uint64_t seed);
  // One window (the carried codes, then the new ones): the samples it makes final. `last`: the
  // utterance's last window (every code emitted, nothing held back).
  Result<std::vector<float>> Decode(const std::vector<int32_t>& codes, bool last);

  const Token2WavConfig& config() const { return config_; }
  std::vector<Placement> placements() const;
  double backend_seconds() const { return graph_seconds_; }

 private:
  explicit Token2Wav(const Token2WavConfig& c) : config_(c) {}
  Status Load(const StagePlan& stage, BackendPool& backends);
  // The caches after the voice prompt's codes and mel, kept for every later Start.
  Status Prompt();
  struct Cache {
    std::vector<float> cnn, att;
    std::vector<int64_t> cnn_shape, att_shape;  // att's axis 3: frames
    std::vector<float> spare_cnn, spare_att;    // where the next run writes (swapped in after it)
  };
  // Runs a graph that reads cache `c` and writes it `m` frames longer (`run` gets the output
  // views), then makes the written caches current.
  Status Advance(Cache& c, int64_t m, const std::function<Status(const TensorView&, const TensorView&)>& run);
  Status Run(Graph& g, const std::vector<TensorView>& inputs, const std::vector<TensorView>& outputs);
  Result<std::vector<float>> DecodeWindow(const std::vector<int32_t>& codes, bool last);
  // mu [mel, m] of `codes` through the encoder; the encoder's cache advances.
  Result<std::vector<float>> Encode(const std::vector<int32_t>& codes, bool last);
  // The flow's mel [mel, m] over mu; `cond` [mel, m] (nullptr: zeros); the step caches advance.
  Result<std::vector<float>> Flow(const std::vector<float>& mu, const float* cond);
  void Trim(Cache& c) const;
  // The steady graphs of the plan, if any, checked against this voice's cache length.
  Status LoadSteady(const StagePlan& stage, BackendPool& backends);

  Token2WavConfig config_;
  std::unique_ptr<Graph> encoder_, encoder_last_, estimator_, hift_;
  // By the frames their caches hold; both for the same frames, or neither.
  std::map<int64_t, std::unique_ptr<Graph>> steady_encoders_, steady_estimators_;
  int64_t time_width_ = 0;  // the steady estimators' time features
  int64_t harmonics_ = 0;     // HiFT's phase0 width
  std::vector<int32_t> voice_codes_;
  std::vector<float> speaker_, voice_mel_;  // voice_mel_: [mel, 2P] (the condition's layout)
  int64_t prompt_frames_ = 0;
  std::vector<float> noise_;  // [mel, noise_frames_]
  int64_t noise_frames_ = 0;
  std::vector<float> fade_;   // Hamming over 2 x source_cache

  Cache encoder_cache_;
  std::vector<Cache> step_caches_;
  bool prompted_ = false;  // prompt_encoder_ and prompt_steps_ hold the caches after the voice prompt
  Cache prompt_encoder_;
  std::vector<Cache> prompt_steps_;
  std::vector<float> mel_tail_;  // [mel, frames] carried into the next HiFT window
  int64_t mel_tail_frames_ = 0;
  std::vector<float> source_tail_, speech_tail_;
  bool started_ = false, first_window_ = true;
  uint64_t seed_ = 0, drawn_ = 0;  // HiFT's noise stream and how far it was read
  double graph_seconds_ = 0;
};

}  // namespace omni_edge::token2wav
