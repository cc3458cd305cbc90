// A media encoder as a stage worker: each step takes the request's next image (or audio), turns
// it into the encoder's input on the device (decode, resize, patches; or WAV, resampling,
// log-mel), runs its graph(s) and emits one "embeddings" event: the rows that replace the
// item's placeholders in the thinker's prompt ([tokens, hidden] float32), with the item's index
// in the request's media list, its preprocessing and graph times, and, for an image, its patch
// grid (the thinker's M-RoPE reads it) or, for audio, its length in seconds.
// With input sources (encoders in series: A -> B -> thinker) it starts once they ended and
// passes their rows on before its own.
#pragma once

#include <array>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "families/encoder/config.h"
#include "media/audio_features.h"
#include "media/image_preprocess.h"
#include "media/image_slices.h"
#include "pipeline/stage_worker.h"
#include "runtime/backend_pool.h"
#include "runtime/tensor.h"

namespace omni_edge::encoder {

class EncoderWorker final : public pipeline::StageWorker {
 public:
  static Result<std::unique_ptr<EncoderWorker>> Open(const StagePlan& stage, BackendPool& backends);

  Status Prepare(const pipeline::Request& request) override;
  Status Begin(pipeline::StepContext& ctx) override;
  Result<pipeline::StepResult> Step(pipeline::StepContext& ctx) override;
  Json Metrics(const pipeline::StepContext& ctx) const override;
  std::vector<Placement> placements() const override;
  Json Describe() const override;
  Json Inspect() const override;  // the last request's times: waited for sources, preprocessing, graphs

 private:
  struct Bound {  // a graph and the buffers bound to it
    std::unique_ptr<Graph> graph;
    HostTensor input, length, output;
  };
  EncoderWorker() = default;
  Status ReadPreprocessor();  // the verified preprocessor_config.json, checked against the plan
  Result<std::vector<float>> EncodeImage(const std::string& bytes, std::array<int64_t, 3>* grid);
  Result<std::vector<float>> EncodeAudio(const std::string& bytes);
  // MiniCPM-o 4.5: each slice through its size's graph (grid: slices, grid columns, grid rows),
  // each 30 s piece of audio through the piece graph.
  Result<std::vector<float>> EncodeSlices(const std::string& bytes, std::array<int64_t, 3>* grid);
  Result<std::vector<float>> EncodeAudioPieces(const std::string& bytes);
  Status Run(Bound& b);

  EncoderConfig config_;
  media::VisionPreprocessing vision_;
  media::SliceConfig slicing_;
  media::AudioFeatureConfig audio_;
  std::map<std::string, Bound> graphs_;  // by patch grid "TxHxW", or "chunk"
  std::vector<std::pair<int64_t, std::string>> items_;  // (index in the request's media, file bytes)
  std::vector<pipeline::Input> forward_;                // the earlier encoders' events, to pass on
  size_t next_ = 0;
  double preprocess_ms_ = 0, encode_ms_ = 0, waited_ms_ = 0;
  double audio_seconds_ = 0;  // of the last audio item (its mel frames x hop)
  int64_t tokens_ = 0;
};

}  // namespace omni_edge::encoder
