#include "models/speech/vocoder.h"

#include <chrono>

namespace omni_edge::speech {

Result<std::unique_ptr<Vocoder>> Vocoder::Create(const StagePlan& stage, BackendPool& backends) {
  if (!stage.vocoder) return Status::Error("invalid_plan", "stage " + std::to_string(stage.stage_id) + " has no vocoder section");
  const VocoderConfig& c = *stage.vocoder;
  std::unique_ptr<Vocoder> v(new Vocoder(c));
  v->window_ = HostTensor(DType::kInt64, {1, c.code_groups, c.window});
  v->wav_ = HostTensor(DType::kFloat32, {1, 1, c.window * c.samples_per_frame - c.tail_samples});
  const std::string name = "vocoder_w" + std::to_string(c.window);
  OE_ASSIGN_OR_RETURN(v->graph_, LoadGraph(backends, stage.graphs.at("vocoder"), std::to_string(c.window), name));
  OE_RETURN_IF_ERROR(ExpectIo(*v->graph_, name, {v->window_.view()}, {v->wav_.view()}));
  OE_RETURN_IF_ERROR(v->graph_->Bind({v->window_.view()}, {v->wav_.view()}));
  return v;
}

Result<std::vector<float>> Vocoder::Decode(const std::vector<int32_t>& codes, int64_t start, int64_t end, bool final) {
  const int64_t G = config_.code_groups, W = config_.window;
  const int64_t frames = int64_t(codes.size()) / G;
  if (start < 0 || end < start || end > frames || (end == start && (!final || start == 0)) ||
      end - start > std::max(config_.first_chunk, config_.chunk)) {
    return Status::Error("invalid_argument", "cannot decode frames [" + std::to_string(start) + ", " + std::to_string(end) +
                                                 ") of " + std::to_string(frames));
  }
  const Emitted e = shape_.Emit(start, end, final);
  int64_t* window = window_.data<int64_t>();
  const int64_t first = start - e.context, n = end - first;
  for (int64_t g = 0; g < G; ++g) {
    for (int64_t t = 0; t < W; ++t) window[g * W + t] = t < n ? codes[size_t((first + t) * G + g)] : 0;  // right padding
  }
  const auto t0 = std::chrono::steady_clock::now();
  OE_RETURN_IF_ERROR(graph_->Run());
  graph_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const float* wav = wav_.data<float>();
  return std::vector<float>(wav + e.first_sample, wav + e.last_sample);
}

}  // namespace omni_edge::speech
