#include "realtime/silero_vad.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "runtime/artifact.h"

namespace omni_edge::realtime {
namespace fs = std::filesystem;

Result<std::unique_ptr<SileroVad>> SileroVad::Open(const VoiceActivityPlan& plan, bool require_qualified,
                                                   BackendPool& backends) {
  StagePlan component;  // the artifact checks of a stage, for the component's one graph
  component.stage_id = -1;
  component.artifact = plan.artifact;
  component.graphs["vad"] = plan.group;
  auto verified = contract::ReadManifest(plan.artifact);
  if (!verified.ok()) {
    return Status::Error(verified.status().reason(), "voice_activity " + plan.artifact + ": " + verified.status().message());
  }
  OE_RETURN_IF_ERROR(CheckStageArtifact(component, *verified, require_qualified));
  for (const auto& [name, hash] : verified->manifest.files) {
    backends.AddVerified({(fs::path(plan.artifact) / name).lexically_normal().string()});
  }
  std::unique_ptr<SileroVad> vad(new SileroVad());
  OE_ASSIGN_OR_RETURN(vad->graph_, LoadGraph(backends, plan.group, "frame", "silero_vad"));
  vad->input_ = HostTensor(DType::kFloat32, {1, kContext + kFrame});
  vad->state_ = HostTensor(DType::kFloat32, {2, 1, 128});
  vad->rate_ = HostTensor(DType::kInt64, {});
  vad->probability_ = HostTensor(DType::kFloat32, {1, 1});
  vad->next_state_ = HostTensor(DType::kFloat32, {2, 1, 128});
  *vad->rate_.data<int64_t>() = kSampleRate;
  // Inputs and outputs by name: the graph's order is its exporter's.
  std::vector<TensorView> in, out;
  for (const GraphIo& io : vad->graph_->inputs()) {
    if (io.name == "input") in.push_back(vad->input_.view());
    else if (io.name == "state") in.push_back(vad->state_.view());
    else if (io.name == "sr") in.push_back(vad->rate_.view());
    else return Status::Error("invalid_artifact", plan.artifact + ": the VAD graph has an unknown input '" + io.name + "'");
  }
  for (const GraphIo& io : vad->graph_->outputs()) {
    if (io.name == "output") out.push_back(vad->probability_.view());
    else if (io.name == "stateN") out.push_back(vad->next_state_.view());
    else return Status::Error("invalid_artifact", plan.artifact + ": the VAD graph has an unknown output '" + io.name + "'");
  }
  if (in.size() != 3 || out.size() != 2) {
    return Status::Error("invalid_artifact", plan.artifact + ": not a Silero VAD v6 graph (input, state, sr -> output, stateN)");
  }
  OE_RETURN_IF_ERROR(ExpectIo(*vad->graph_, "silero_vad", in, out));
  OE_RETURN_IF_ERROR(vad->graph_->Bind(in, out));
  vad->Reset();
  return vad;
}

void SileroVad::Reset() {
  std::memset(input_.data<float>(), 0, input_.nbytes());
  std::memset(state_.data<float>(), 0, state_.nbytes());
}

Result<float> SileroVad::Score(const float* frame) {
  float* x = input_.data<float>();
  std::memmove(x, x + kFrame, kContext * sizeof(float));  // the previous frame's last samples
  std::memcpy(x + kContext, frame, kFrame * sizeof(float));
  OE_RETURN_IF_ERROR(graph_->Run());
  std::memcpy(state_.data<float>(), next_state_.data<float>(), state_.nbytes());
  const float p = *probability_.data<float>();
  if (!std::isfinite(p)) return Status::Error("backend_error", "silero_vad: a non-finite probability");
  return std::clamp(p, 0.0f, 1.0f);
}

}  // namespace omni_edge::realtime
