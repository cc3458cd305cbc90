#include "families/internvla/internvla_worker.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "pipeline/policy_io.h"
#include "media/image_decode.h"

namespace omni_edge::internvla {
namespace {

using pipeline::InvalidObservation;

double MillisecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// Interleaved M-RoPE: frequency j rotates by the height position when j % 3 == 1 and
// j < 3 x section[1], by the width position when j % 3 == 2 and j < 3 x section[2], else by
// time. cos and sin [positions, 2 x freqs] (halves repeated), the product in float32.
void MropeTables(const InternVlaConfig& c, const std::vector<std::array<int64_t, 3>>& positions, HostTensor* cos,
                 HostTensor* sin) {
  const size_t half = c.rope_inv_freq.size();
  float* co = cos->data<float>();
  float* si = sin->data<float>();
  for (size_t p = 0; p < positions.size(); ++p) {
    for (size_t j = 0; j < half; ++j) {
      int axis = 0;
      if (j % 3 == 1 && int64_t(j) < 3 * c.mrope_section[1]) axis = 1;
      if (j % 3 == 2 && int64_t(j) < 3 * c.mrope_section[2]) axis = 2;
      const float angle = float(positions[p][size_t(axis)]) * c.rope_inv_freq[j];
      const auto cv = float(std::cos(double(angle))), sv = float(std::sin(double(angle)));
      co[p * 2 * half + j] = co[p * 2 * half + half + j] = cv;
      si[p * 2 * half + j] = si[p * 2 * half + half + j] = sv;
    }
  }
}

}  // namespace

Result<std::unique_ptr<InternVlaWorker>> InternVlaWorker::Open(const StagePlan& stage, BackendPool& backends) {
  const InternVlaConfig* config = stage.config_as<InternVlaConfig>();
  if (config == nullptr) return Status::Error("internal", "stage " + std::to_string(stage.stage_id) + " is not an internvla stage");
  std::unique_ptr<InternVlaWorker> w(new InternVlaWorker());
  w->config_ = *config;
  const InternVlaConfig& c = w->config_;
  OE_ASSIGN_OR_RETURN(w->tokenizer_, text::Tokenizer::Load(c.tokenizer));
  const int64_t S = c.camera_slots, T = c.image_tokens, C = c.context_length(), A = c.chunk_size, D = c.head_dim;
  const int64_t patches = (c.image_height / c.patch) * (c.image_width / c.patch);
  w->patches_ = HostTensor(DType::kFloat32, {patches, 3 * c.temporal_patch * c.patch * c.patch});
  w->image_rows_ = HostTensor(DType::kFloat32, {1, T, c.vlm_hidden});
  w->frame_in_ = HostTensor(DType::kFloat32, {1, 3, c.cosmos_size, c.cosmos_size});
  w->frame_rows_ = HostTensor(DType::kFloat32, {1, c.frame_rows, c.expert_hidden});
  w->ids_ = HostTensor(DType::kInt64, {1, c.prefix_length()});
  w->all_image_rows_ = HostTensor(DType::kFloat32, {1, S * T, c.vlm_hidden});
  w->history_rows_ = HostTensor(DType::kFloat32, {1, c.history_length(), c.expert_hidden});
  w->context_bias_ = HostTensor(DType::kFloat32, {1, 1, C, C});
  w->context_cos_ = HostTensor(DType::kFloat32, {1, C, D});
  w->context_sin_ = HostTensor(DType::kFloat32, {1, C, D});
  w->keys_ = HostTensor(DType::kFloat32, {c.layers, 1, c.kv_heads, C, D});
  w->values_ = HostTensor(DType::kFloat32, {c.layers, 1, c.kv_heads, C, D});
  w->step_bias_ = HostTensor(DType::kFloat32, {1, 1, A + 1, C + A + 1});
  w->x_ = HostTensor(DType::kFloat32, {1, A, c.max_action_dim});
  w->time_emb_ = HostTensor(DType::kFloat32, {1, c.expert_hidden});
  w->state_ = HostTensor(DType::kFloat32, {1, c.max_state_dim});
  w->step_cos_ = HostTensor(DType::kFloat32, {1, A + 1, D});
  w->step_sin_ = HostTensor(DType::kFloat32, {1, A + 1, D});
  w->velocity_ = HostTensor(DType::kFloat32, {1, A, c.max_action_dim});
  w->history_.resize(c.cameras.size());

  const auto load = [&](const char* role, const char* key, std::vector<TensorView> in, std::vector<TensorView> out,
                        std::unique_ptr<Graph>* graph) -> Status {
    const std::string name = std::string("internvla_") + role;
    OE_ASSIGN_OR_RETURN(*graph, LoadGraph(backends, stage.graphs.at(role), key, name));
    OE_RETURN_IF_ERROR(ExpectIo(**graph, name, in, out));
    return (*graph)->Bind(in, out);
  };
  OE_RETURN_IF_ERROR(load("vision", "image", {w->patches_.view()}, {w->image_rows_.view()}, &w->vision_));
  OE_RETURN_IF_ERROR(load("frame", "frame", {w->frame_in_.view()}, {w->frame_rows_.view()}, &w->frame_));
  OE_RETURN_IF_ERROR(load("context", "context",
                          {w->ids_.view(), w->all_image_rows_.view(), w->history_rows_.view(), w->context_bias_.view(),
                           w->context_cos_.view(), w->context_sin_.view()},
                          {w->keys_.view(), w->values_.view()}, &w->context_));
  OE_RETURN_IF_ERROR(load("expert", "step",
                          {w->keys_.view(), w->values_.view(), w->step_bias_.view(), w->x_.view(), w->time_emb_.view(),
                           w->state_.view(), w->step_cos_.view(), w->step_sin_.view()},
                          {w->velocity_.view()}, &w->expert_));
  return w;
}

Status InternVlaWorker::Prepare(const pipeline::Request& r) {
  const InternVlaConfig& c = config_;
  if (!r.observation) return InvalidObservation("a policy plan acts on an observation (request.observation)");
  const pipeline::Observation& o = *r.observation;
  OE_RETURN_IF_ERROR(pipeline::CheckCaptureTime(o, c.max_observation_age_ms));
  OE_ASSIGN_OR_RETURN(auto images, pipeline::CameraImages(o, c.cameras, size_t(c.history)));
  for (size_t k = 0; k < images.size(); ++k) {
    if (images[k].size() != 1 && int64_t(images[k].size()) != c.history) {
      return InvalidObservation("camera '" + c.cameras[k] + "' has " + std::to_string(images[k].size()) +
                                " images: give its current frame, or its whole history of " + std::to_string(c.history) +
                                " frames (oldest first)");
    }
  }
  if (int64_t(o.state.size()) > c.state_dim) {
    return InvalidObservation("the state has " + std::to_string(o.state.size()) + " values; this policy's robot has " +
                              std::to_string(c.state_dim));
  }
  OE_ASSIGN_OR_RETURN(std::vector<float> noise, pipeline::InitialNoise(o, c.chunk_size, c.max_action_dim));
  if (!r.prompt_ids.empty()) return InvalidObservation("a policy reads its task as text (prompt), not as ids");
  if (!r.messages.empty()) return InvalidObservation("a policy reads its task as text (prompt), not as a conversation");
  OE_ASSIGN_OR_RETURN(std::vector<text::TokenId> ids, tokenizer_->Encode(r.prompt, /*add_special_tokens=*/false));
  std::vector<int64_t> prompt;
  for (text::TokenId id : ids) {
    if (id == c.image_token_id || id == c.vision_start_id || id == c.vision_end_id) {
      return Status::Error("invalid_prompt", "the task holds a vision token (<|image_pad|>, <|vision_start|>, <|vision_end|>)");
    }
    prompt.push_back(id);
  }
  if (int64_t(prompt.size()) > c.prompt_tokens) {
    return Status::Error("invalid_prompt", "the task is " + std::to_string(prompt.size()) + " tokens; this policy's prefix holds " +
                                               std::to_string(c.prompt_tokens));
  }
  images_ = std::move(images);
  state_values_ = o.state;
  state_values_.resize(size_t(c.max_state_dim), 0.0f);
  noise_ = std::move(noise);
  prompt_ = std::move(prompt);
  timestamp_ms_ = o.timestamp_ms;
  deadline_ms_ = r.deadline_ms;
  reset_history_ = o.reset_history;
  return Status::Ok();
}

Status InternVlaWorker::Run(Graph& graph, double* ms) {
  const auto start = std::chrono::steady_clock::now();
  Status st = graph.Run();
  *ms += MillisecondsSince(start);
  return st;
}

Result<std::vector<float>> InternVlaWorker::VisionRows(const media::FloatImage* frame) {
  const InternVlaConfig& c = config_;
  media::FloatImage black;
  if (frame == nullptr) {  // an empty slot: vLLM-Omni's zero image, its rows valid in the prefix
    if (!empty_slot_rows_.empty()) return empty_slot_rows_;
    black = {c.image_width, c.image_height, std::vector<float>(size_t(3 * c.image_width * c.image_height), 0.0f)};
    frame = &black;
  }
  const auto start = std::chrono::steady_clock::now();
  OE_ASSIGN_OR_RETURN(media::VisionPatches p,
                      media::PatchesOf(*frame, c.patch, c.merge, c.temporal_patch, c.image_mean.data(), c.image_std.data()));
  std::memcpy(patches_.data<float>(), p.values.data(), patches_.nbytes());
  preprocess_ms_ += MillisecondsSince(start);
  OE_RETURN_IF_ERROR(Run(*vision_, &vision_ms_));
  std::vector<float> rows(image_rows_.data<float>(), image_rows_.data<float>() + image_rows_.view().numel());
  if (frame == &black) empty_slot_rows_ = rows;
  return rows;
}

Result<std::vector<float>> InternVlaWorker::FrameRows(const media::FloatImage& frame) {
  const InternVlaConfig& c = config_;
  const auto start = std::chrono::steady_clock::now();
  const media::FloatImage sized = (frame.height == c.cosmos_size && frame.width == c.cosmos_size)
                                      ? frame : media::ResizeBilinear(frame, c.cosmos_size, c.cosmos_size);
  float* in = frame_in_.data<float>();
  for (size_t i = 0; i < sized.planes.size(); ++i) in[i] = sized.planes[i] * 2.0f - 1.0f;
  preprocess_ms_ += MillisecondsSince(start);
  OE_RETURN_IF_ERROR(Run(*frame_, &frame_ms_));
  ++frames_encoded_;
  return std::vector<float>(frame_rows_.data<float>(), frame_rows_.data<float>() + frame_rows_.view().numel());
}

// Camera k's history after this observation (not yet the session's: Begin commits it once the
// whole context is built).
Status InternVlaWorker::History(size_t k, std::vector<media::FloatImage>& frames, std::deque<Frame>* out) {
  const InternVlaConfig& c = config_;
  out->clear();
  if (int64_t(frames.size()) == c.history) {  // the whole history given
    for (const auto& f : frames) {
      OE_ASSIGN_OR_RETURN(auto rows, FrameRows(f));
      out->push_back({std::move(rows), timestamp_ms_});
    }
    return Status::Ok();
  }
  if (!reset_history_) *out = history_[k];
  if (!out->empty()) {
    const double gap = timestamp_ms_ - out->back().timestamp_ms;
    if (gap <= 0) {
      return Status::Error("stale_observation", "camera '" + c.cameras[k] + "': this observation was not captured after the " +
                                                    "previous one of its history; reset the history (reset_history) or give the whole history");
    }
    if (c.max_history_gap_ms > 0 && gap > c.max_history_gap_ms) {
      char buf[96];
      std::snprintf(buf, sizeof buf, "%.1f ms after the previous frame (at most %.1f)", gap, c.max_history_gap_ms);
      return Status::Error("stale_observation", "camera '" + c.cameras[k] + "': this frame comes " + buf +
                                                    ": its history is stale; reset it (reset_history) or give the whole history");
    }
  }
  OE_ASSIGN_OR_RETURN(auto rows, FrameRows(frames.back()));
  out->push_back({std::move(rows), timestamp_ms_});
  while (int64_t(out->size()) > c.history) out->pop_front();
  while (int64_t(out->size()) < c.history) out->push_front(out->front());  // an episode's start
  return Status::Ok();
}

Status InternVlaWorker::Begin(pipeline::StepContext& ctx) {
  const InternVlaConfig& c = config_;
  step_ = 0;
  emitted_ = false;
  preprocess_ms_ = vision_ms_ = frame_ms_ = context_ms_ = 0;
  frames_encoded_ = 0;
  step_ms_.clear();
  age_at_start_ms_ = pipeline::NowUnixMs() - timestamp_ms_;
  OE_RETURN_IF_ERROR(pipeline::CheckAge(timestamp_ms_, c.max_observation_age_ms, "when its request starts"));
  const int64_t T = c.image_tokens, Hv = c.vlm_hidden, He = c.expert_hidden, R = c.frame_rows;
  std::vector<std::deque<Frame>> histories(c.cameras.size());
  for (size_t k = 0; k < c.cameras.size(); ++k) {
    std::vector<media::FloatImage> frames;
    const auto start = std::chrono::steady_clock::now();
    for (const auto& bytes : images_[k]) {
      auto image = media::DecodeImage(bytes);
      if (!image.ok()) return InvalidObservation("camera '" + c.cameras[k] + "': " + image.status().message());
      auto sized = media::ResizeWithPad(media::ToUnitFloat(*image), c.image_height, c.image_width);
      if (!sized.ok()) return InvalidObservation("camera '" + c.cameras[k] + "': " + sized.status().message());
      frames.push_back(std::move(sized.value()));
    }
    preprocess_ms_ += MillisecondsSince(start);
    OE_ASSIGN_OR_RETURN(auto rows, VisionRows(&frames.back()));
    std::copy(rows.begin(), rows.end(), all_image_rows_.data<float>() + int64_t(k) * T * Hv);
    OE_RETURN_IF_ERROR(History(k, frames, &histories[k]));
  }
  float* history = history_rows_.data<float>();
  for (int64_t s = 0; s < c.camera_slots; ++s) {
    float* slot = history + s * c.history * R * He;
    if (s < int64_t(c.cameras.size())) {
      for (int64_t f = 0; f < c.history; ++f) {
        const auto& rows = histories[size_t(s)][size_t(f)].rows;
        std::copy(rows.begin(), rows.end(), slot + f * R * He);
      }
    } else {  // masked: any finite values
      std::fill(slot, slot + c.history * R * He, 0.0f);
      OE_ASSIGN_OR_RETURN(auto rows, VisionRows(nullptr));
      std::copy(rows.begin(), rows.end(), all_image_rows_.data<float>() + s * T * Hv);
    }
  }
  ContextTables();
  OE_RETURN_IF_ERROR(Run(*context_, &context_ms_));
  std::memcpy(x_.data<float>(), noise_.data(), x_.nbytes());
  std::memcpy(state_.data<float>(), state_values_.data(), state_.nbytes());
  // The flow's times as sample_actions counts them: float32 t from 1, t += dt while t >= -dt / 2.
  times_.clear();
  const auto dt = float(-1.0 / double(c.num_steps));
  for (float t = 1.0f; t >= -dt / 2; t += dt) times_.push_back(t);
  for (size_t k = 0; k < c.cameras.size(); ++k) history_[k] = std::move(histories[k]);
  (void)ctx;
  return Status::Ok();
}

// The context's ids, M-RoPE tables and attention bias, and the suffix's tables and bias.
void InternVlaWorker::ContextTables() {
  const InternVlaConfig& c = config_;
  const int64_t P = c.prefix_length(), M = c.history_length(), C = c.context_length(), A = c.chunk_size;
  const int64_t gw = c.image_width / c.patch / c.merge;
  int64_t* ids = ids_.data<int64_t>();
  std::vector<bool> valid(size_t(C), true);
  int64_t at = 0;
  for (int64_t s = 0; s < c.camera_slots; ++s) {
    ids[at++] = c.vision_start_id;
    for (int64_t i = 0; i < c.image_tokens; ++i) ids[at++] = c.image_token_id;
    ids[at++] = c.vision_end_id;
  }
  for (int64_t i = 0; i < c.prompt_tokens; ++i, ++at) {
    const bool real = i < int64_t(prompt_.size());
    ids[at] = real ? prompt_[size_t(i)] : c.pad_id;
    valid[size_t(at)] = real;
  }
  // Qwen3-VL's get_rope_index over the valid prefix: text counts on all axes, an image's rows
  // sit at (start, start + row, start + column); padding at 1.
  std::vector<std::array<int64_t, 3>> positions(size_t(C), {1, 1, 1});
  int64_t next = 0;
  for (int64_t i = 0; i < P; ++i) {
    if (!valid[size_t(i)]) continue;
    if (ids[i] == c.image_token_id) {
      const int64_t start = next;
      for (int64_t r = 0; r < c.image_tokens; ++r, ++i) {
        positions[size_t(i)] = {start, start + r / gw, start + r % gw};
        next = std::max({next, start + r / gw + 1, start + r % gw + 1});
      }
      --i;
    } else {
      positions[size_t(i)] = {next, next, next};
      ++next;
    }
  }
  std::array<int64_t, 3> top{0, 0, 0};
  for (int64_t i = 0; i < P; ++i) {
    for (size_t a = 0; a < 3; ++a) top[a] = std::max(top[a], positions[size_t(i)][a]);
  }
  for (int64_t m = 0; m < M; ++m) {
    positions[size_t(P + m)] = {top[0] + m + 1, top[1] + m + 1, top[2] + m + 1};
    valid[size_t(P + m)] = m / (c.history * c.frame_rows) < int64_t(c.cameras.size());
  }
  MropeTables(c, positions, &context_cos_, &context_sin_);
  // The prefix sees its valid slots; the history the valid prefix and its valid frames.
  float* bias = context_bias_.data<float>();
  for (int64_t q = 0; q < C; ++q) {
    for (int64_t k = 0; k < C; ++k) bias[q * C + k] = valid[size_t(k)] && (q >= P || k < P) ? 0.0f : c.mask_value;
  }
  std::vector<std::array<int64_t, 3>> suffix(size_t(A + 1));
  for (int64_t k = 0; k <= A; ++k) suffix[size_t(k)] = {top[0] + M + k + 1, top[1] + M + k + 1, top[2] + M + k + 1};
  MropeTables(c, suffix, &step_cos_, &step_sin_);
  // The state token sees the valid context and itself; the chunk also sees the state and itself.
  const int64_t keys = C + A + 1;
  float* sb = step_bias_.data<float>();
  for (int64_t q = 0; q <= A; ++q) {
    for (int64_t k = 0; k < keys; ++k) {
      const bool allowed = k < C ? bool(valid[size_t(k)]) : (k == C || q > 0);
      sb[q * keys + k] = allowed ? 0.0f : c.mask_value;
    }
  }
}

Result<pipeline::StepResult> InternVlaWorker::Step(pipeline::StepContext& ctx) {
  using pipeline::StepResult;
  const InternVlaConfig& c = config_;
  const float t = times_[size_t(step_)];
  // sin and cos of t x 2 pi / period, in double from the plan's float64 scalings, then float32.
  float* emb = time_emb_.data<float>();
  const size_t half = c.time_scaling.size();
  for (size_t j = 0; j < half; ++j) {
    const double angle = c.time_scaling[j] * double(t);
    emb[j] = float(std::sin(angle));
    emb[half + j] = float(std::cos(angle));
  }
  double ms = 0;
  OE_RETURN_IF_ERROR(Run(*expert_, &ms));
  step_ms_.push_back(ms);
  float* x = x_.data<float>();
  const float* v = velocity_.data<float>();
  const auto dt = float(-1.0 / double(c.num_steps));
  for (int64_t i = 0; i < x_.view().numel(); ++i) x[i] = x[i] + dt * v[i];
  if (++step_ < int64_t(times_.size())) return StepResult::Continue();
  const double produced = pipeline::NowUnixMs();
  pipeline::Output out = pipeline::ActionEvent(
      c.actions, c.identity, x, c.chunk_size, c.action_dim, c.max_action_dim,
      {timestamp_ms_, produced, deadline_ms_, age_at_start_ms_},
      {{"action_mode", c.action_mode}, {"timings", Inspect()["timings"]}});
  OE_ASSIGN_OR_RETURN(bool delivered, ctx.Emit(std::move(out)));
  emitted_ = delivered;
  return StepResult::Finish("done");
}

Json InternVlaWorker::Metrics(const pipeline::StepContext& ctx) const {
  Json out = Inspect();
  out["timings"]["total_ms"] = ctx.ElapsedMs();
  return out;
}

Json InternVlaWorker::Inspect() const {
  double denoise = 0;
  for (double ms : step_ms_) denoise += ms;
  return {{"action_emitted", emitted_},
          {"steps", int64_t(step_ms_.size())},
          {"frames_encoded", frames_encoded_},
          {"observation_age_ms", {{"at_start", age_at_start_ms_}}},
          {"deadline_ms", deadline_ms_},
          {"timings", {{"preprocess_ms", preprocess_ms_}, {"vision_ms", vision_ms_}, {"frame_ms", frame_ms_},
                       {"context_ms", context_ms_}, {"step_ms", step_ms_}, {"denoise_ms", denoise}}}};
}

std::vector<Placement> InternVlaWorker::placements() const {
  return {vision_->placement(), frame_->placement(), context_->placement(), expert_->placement()};
}

Json InternVlaWorker::Describe() const {
  const InternVlaConfig& c = config_;
  return {{"model", c.identity},
          {"cameras", c.cameras},
          {"camera_slots", c.camera_slots},
          {"history", c.history},
          {"image_resolution", {c.image_height, c.image_width}},
          {"state_dim", c.state_dim},
          {"action_dim", c.action_dim},
          {"chunk_size", c.chunk_size},
          {"num_steps", c.num_steps},
          {"action_mode", c.action_mode},
          {"max_observation_age_ms", c.max_observation_age_ms},
          {"max_history_gap_ms", c.max_history_gap_ms},
          {"actions", {{"schema_version", c.actions.schema_version}, {"names", c.actions.names}, {"units", c.actions.units},
                       {"dt_ms", c.actions.dt_ms}}}};
}

}  // namespace omni_edge::internvla
