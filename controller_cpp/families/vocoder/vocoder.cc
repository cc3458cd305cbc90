#include "families/vocoder/vocoder.h"

#include <algorithm>
#include <chrono>

namespace omni_edge::vocoder {

Result<std::unique_ptr<Vocoder>> Vocoder::Create(const StagePlan& stage, BackendPool& backends) {
  const VocoderConfig* config = stage.config_as<VocoderConfig>();
  if (config == nullptr) return Status::Error("internal", "stage " + std::to_string(stage.stage_id) + " is not a vocoder stage");
  const VocoderConfig& c = *config;
  std::unique_ptr<Vocoder> v(new Vocoder(c));
  for (int64_t frames : c.windows) {
    Window w;
    w.frames = frames;
    w.codes = HostTensor(DType::kInt64, {1, c.code_groups, frames});
    w.wav = HostTensor(DType::kFloat32, {1, 1, frames * c.samples_per_frame - c.tail_samples});
    const std::string name = "vocoder_w" + std::to_string(frames);
    OE_ASSIGN_OR_RETURN(w.graph, LoadGraph(backends, stage.graphs.at("vocoder"), std::to_string(frames), name));
    OE_RETURN_IF_ERROR(ExpectIo(*w.graph, name, {w.codes.view()}, {w.wav.view()}));
    OE_RETURN_IF_ERROR(w.graph->Bind({w.codes.view()}, {w.wav.view()}));
    v->windows_.push_back(std::move(w));
  }
  return v;
}

size_t Vocoder::Pick(int64_t n) const {
  for (size_t i = 0; i < windows_.size(); ++i) {
    if (windows_[i].frames >= n + 1) return i;
  }
  return windows_.size() - 1;
}

Status Vocoder::Run(Window& w) {
  const auto t0 = std::chrono::steady_clock::now();
  OE_RETURN_IF_ERROR(w.graph->Run());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  graph_seconds_ += seconds;
  w.cost_ms.Add(1000.0 * seconds);
  return Status::Ok();
}

Status Vocoder::WarmUp() {
  // The smallest and the largest window only: a window's cost is close to linear in its frames,
  // so the others are interpolated until they have run (a load pays two runs, not one per window).
  for (Window* w : {&windows_.front(), &windows_.back()}) {
    std::fill_n(w->codes.data<int64_t>(), NumElements(w->codes.shape()), int64_t(0));
    OE_RETURN_IF_ERROR(Run(*w));
  }
  graph_seconds_ = 0;
  return Status::Ok();
}

double Vocoder::CostMs(int64_t start, int64_t n) const {
  const int64_t context = std::min(config_.left_context, start);
  const Window& w = windows_[Pick(context + n)];
  if (w.cost_ms.seen()) return w.cost_ms.value();
  const Window &lo = windows_.front(), &hi = windows_.back();
  if (hi.frames == lo.frames) return hi.cost_ms.value();
  const double share = double(w.frames - lo.frames) / double(hi.frames - lo.frames);
  return lo.cost_ms.value() + share * (hi.cost_ms.value() - lo.cost_ms.value());
}

std::vector<Placement> Vocoder::placements() const {
  std::vector<Placement> out;
  for (const auto& w : windows_) out.push_back(w.graph->placement());
  return out;
}

Result<std::vector<float>> Vocoder::Decode(const std::vector<int32_t>& codes, int64_t start, int64_t end, bool final) {
  const int64_t G = config_.code_groups;
  const int64_t frames = int64_t(codes.size()) / G;
  if (start < 0 || end < start || end > frames || (end == start && (!final || start == 0)) ||
      end - start > std::max(config_.first_chunk, config_.chunk)) {
    return Status::Error("invalid_argument", "cannot decode frames [" + std::to_string(start) + ", " + std::to_string(end) +
                                                 ") of " + std::to_string(frames));
  }
  const Emitted e = shape_.Emit(start, end, final);
  const int64_t first = start - e.context, n = end - first;
  Window* w = &windows_[Pick(n)];
  const int64_t W = w->frames;
  int64_t* window = w->codes.data<int64_t>();
  for (int64_t g = 0; g < G; ++g) {
    for (int64_t t = 0; t < W; ++t) window[g * W + t] = t < n ? codes[size_t((first + t) * G + g)] : 0;  // right padding
  }
  OE_RETURN_IF_ERROR(Run(*w));
  const float* wav = w->wav.data<float>();
  return std::vector<float>(wav + e.first_sample, wav + e.last_sample);
}

}  // namespace omni_edge::vocoder
