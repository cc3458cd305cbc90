#include "families/policy/policy_worker.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "pipeline/policy_io.h"
#include "media/image_decode.h"
#include "media/image_preprocess.h"

namespace omni_edge::policy {
namespace {

using pipeline::CameraImages;
using pipeline::CheckAge;
using pipeline::CheckCaptureTime;
using pipeline::InitialNoise;
using pipeline::InvalidObservation;
using pipeline::NowUnixMs;

double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

Status Invalid(const std::string& what) { return InvalidObservation(what); }

// cos and sin of position x frequency, [positions, 2 x freqs] (the halves repeated), as
// transformers' rotary embedding: the product in float32, then its cosine and sine.
void RopeTables(const std::vector<float>& inv_freq, const std::vector<int64_t>& positions, HostTensor* cos, HostTensor* sin) {
  const size_t half = inv_freq.size();
  float* c = cos->data<float>();
  float* s = sin->data<float>();
  for (size_t p = 0; p < positions.size(); ++p) {
    for (size_t j = 0; j < half; ++j) {
      const float angle = float(positions[p]) * inv_freq[j];
      const auto cv = float(std::cos(double(angle))), sv = float(std::sin(double(angle)));
      c[p * 2 * half + j] = c[p * 2 * half + half + j] = cv;
      s[p * 2 * half + j] = s[p * 2 * half + half + j] = sv;
    }
  }
}

}  // namespace

Result<std::unique_ptr<PolicyWorker>> PolicyWorker::Open(const StagePlan& stage, BackendPool& backends) {
  const PolicyConfig* config = stage.config_as<PolicyConfig>();
  if (config == nullptr) return Status::Error("internal", "stage " + std::to_string(stage.stage_id) + " is not a policy stage");
  std::unique_ptr<PolicyWorker> w(new PolicyWorker());
  w->config_ = *config;
  const PolicyConfig& c = w->config_;
  OE_ASSIGN_OR_RETURN(w->tokenizer_, text::Tokenizer::Load(c.tokenizer));
  const int64_t C = int64_t(c.cameras.size()), T = c.image_tokens, H = c.hidden_size, P = c.prefix_length();
  w->pixels_ = HostTensor(DType::kFloat32, {1, 3, c.image_size, c.image_size});
  w->image_rows_ = HostTensor(DType::kFloat32, {1, T, H});
  w->prefix_rows_ = HostTensor(DType::kFloat32, {1, C * T, H});
  w->prompt_ids_ = HostTensor(DType::kInt64, {1, c.prompt_tokens});
  w->mask_ = HostTensor(DType::kInt64, {1, P});
  w->keys_ = HostTensor(DType::kFloat32, {c.layers, 1, c.kv_heads, P, c.head_dim});
  w->values_ = HostTensor(DType::kFloat32, {c.layers, 1, c.kv_heads, P, c.head_dim});
  w->prefix_cos_ = HostTensor(DType::kFloat32, {1, P, c.head_dim});
  w->prefix_sin_ = HostTensor(DType::kFloat32, {1, P, c.head_dim});
  w->expert_cos_ = HostTensor(DType::kFloat32, {1, c.chunk_size + 1, c.head_dim});
  w->expert_sin_ = HostTensor(DType::kFloat32, {1, c.chunk_size + 1, c.head_dim});
  w->expert_bias_ = HostTensor(DType::kFloat32, {1, 1, c.chunk_size + 1, P + c.chunk_size + 1});
  w->x_ = HostTensor(DType::kFloat32, {1, c.chunk_size, c.action_dim});
  w->time_emb_ = HostTensor(DType::kFloat32, {1, 2 * int64_t(c.time_freq.size())});
  w->state_ = HostTensor(DType::kFloat32, {1, c.state_dim});
  w->velocity_ = HostTensor(DType::kFloat32, {1, c.chunk_size, c.action_dim});

  const auto load = [&](const char* role, const char* key, std::vector<TensorView> in, std::vector<TensorView> out,
                        std::unique_ptr<Graph>* graph) -> Status {
    const std::string name = std::string("policy_") + role;
    OE_ASSIGN_OR_RETURN(*graph, LoadGraph(backends, stage.graphs.at(role), key, name));
    OE_RETURN_IF_ERROR(ExpectIo(**graph, name, in, out));
    return (*graph)->Bind(in, out);
  };
  OE_RETURN_IF_ERROR(load("vision", "image", {w->pixels_.view()}, {w->image_rows_.view()}, &w->vision_));
  OE_RETURN_IF_ERROR(load("prefix", "prefix",
                          {w->prefix_rows_.view(), w->prompt_ids_.view(), w->mask_.view(), w->prefix_cos_.view(),
                           w->prefix_sin_.view()},
                          {w->keys_.view(), w->values_.view()}, &w->prefix_));
  OE_RETURN_IF_ERROR(load("expert", "step",
                          {w->keys_.view(), w->values_.view(), w->expert_bias_.view(), w->x_.view(), w->time_emb_.view(),
                           w->state_.view(), w->expert_cos_.view(), w->expert_sin_.view()},
                          {w->velocity_.view()}, &w->expert_));
  return w;
}

Status PolicyWorker::Prepare(const pipeline::Request& r) {
  const PolicyConfig& c = config_;
  if (!r.observation) return Invalid("a policy plan acts on an observation (request.observation)");
  const pipeline::Observation& o = *r.observation;
  OE_RETURN_IF_ERROR(CheckCaptureTime(o, c.max_observation_age_ms));
  OE_ASSIGN_OR_RETURN(auto per_camera, CameraImages(o, c.cameras, 1));
  std::vector<std::string> images;
  for (auto& files : per_camera) images.push_back(std::move(files[0]));
  if (int64_t(o.state.size()) > c.state_dim) {
    return Invalid("the state has " + std::to_string(o.state.size()) + " values; this policy takes at most " +
                   std::to_string(c.state_dim));
  }
  OE_ASSIGN_OR_RETURN(std::vector<float> noise, InitialNoise(o, c.chunk_size, c.action_dim));
  if (!r.prompt_ids.empty()) return Invalid("a policy reads its task as text (prompt), not as ids");
  if (!r.messages.empty()) return Invalid("a policy reads its task as text (prompt), not as a conversation");
  OE_ASSIGN_OR_RETURN(std::vector<text::TokenId> ids, tokenizer_->Encode(r.prompt + c.prompt_suffix, /*add_special_tokens=*/false));
  std::vector<int64_t> prompt;
  if (c.bos_id >= 0) prompt.push_back(c.bos_id);
  for (text::TokenId id : ids) {
    if (id == c.image_token_id) return Status::Error("invalid_prompt", "the prompt holds the image placeholder token");
    prompt.push_back(id);
  }
  if (int64_t(prompt.size()) > c.prompt_tokens) {
    return Status::Error("invalid_prompt", "the prompt is " + std::to_string(prompt.size()) + " tokens; this policy's prefix holds " +
                                               std::to_string(c.prompt_tokens));
  }
  images_ = std::move(images);
  state_values_ = o.state;
  state_values_.resize(size_t(c.state_dim), 0.0f);
  noise_ = std::move(noise);
  prompt_ = std::move(prompt);
  timestamp_ms_ = o.timestamp_ms;
  deadline_ms_ = r.deadline_ms;
  return Status::Ok();
}

Status PolicyWorker::Run(Graph& graph, double* ms) {
  const auto start = std::chrono::steady_clock::now();
  Status st = graph.Run();
  *ms += MsSince(start);
  return st;
}

Status PolicyWorker::Begin(pipeline::StepContext& ctx) {
  const PolicyConfig& c = config_;
  step_ = 0;
  emitted_ = deadline_missed_ = false;
  preprocess_ms_ = vision_ms_ = prefix_ms_ = lateness_ms_ = age_at_emission_ms_ = 0;
  step_ms_.clear();
  age_at_start_ms_ = NowUnixMs() - timestamp_ms_;
  OE_RETURN_IF_ERROR(CheckAge(timestamp_ms_, c.max_observation_age_ms, "when its request starts"));
  const int64_t T = c.image_tokens, H = c.hidden_size;
  for (size_t k = 0; k < images_.size(); ++k) {
    const auto start = std::chrono::steady_clock::now();
    auto image = media::DecodeImage(images_[k]);
    if (!image.ok()) return Invalid("camera '" + c.cameras[k] + "': " + image.status().message());
    auto pixels = media::ResizeWithPad(*image, c.image_size, c.image_mean.data(), c.image_std.data());
    if (!pixels.ok()) return Invalid("camera '" + c.cameras[k] + "': " + pixels.status().message());
    std::memcpy(pixels_.data<float>(), pixels->data(), pixels_.nbytes());
    preprocess_ms_ += MsSince(start);
    OE_RETURN_IF_ERROR(Run(*vision_, &vision_ms_));
    std::memcpy(prefix_rows_.data<float>() + int64_t(k) * T * H, image_rows_.data<float>(), image_rows_.nbytes());
  }
  // The prefix: the cameras' rows, then the prompt's ids; its unused text slots masked out.
  int64_t* ids = prompt_ids_.data<int64_t>();
  int64_t* mask = mask_.data<int64_t>();
  const int64_t image_rows = int64_t(images_.size()) * T;
  for (int64_t i = 0; i < c.prompt_tokens; ++i) ids[i] = i < int64_t(prompt_.size()) ? prompt_[size_t(i)] : 0;
  const int64_t valid = image_rows + int64_t(prompt_.size());
  std::vector<int64_t> positions(size_t(c.prefix_length()));
  for (int64_t i = 0; i < c.prefix_length(); ++i) {
    mask[i] = i < valid ? 1 : 0;
    positions[size_t(i)] = std::min(i, valid - 1);  // the mask's running count less one
  }
  RopeTables(c.rope_inv_freq, positions, &prefix_cos_, &prefix_sin_);
  OE_RETURN_IF_ERROR(Run(*prefix_, &prefix_ms_));
  // The expert's tokens (the state, then the chunk) follow the prefix's valid positions.
  positions.assign(size_t(c.chunk_size + 1), 0);
  for (int64_t k = 0; k <= c.chunk_size; ++k) positions[size_t(k)] = valid + k;
  RopeTables(c.expert_rope_inv_freq, positions, &expert_cos_, &expert_sin_);
  // PI0's two blocks: the state token sees the valid prefix and itself; the chunk's tokens the
  // valid prefix, the state and each other.
  const int64_t P = c.prefix_length(), keys = P + c.chunk_size + 1;
  float* bias = expert_bias_.data<float>();
  for (int64_t q = 0; q <= c.chunk_size; ++q) {
    for (int64_t k = 0; k < keys; ++k) {
      const bool allowed = k < P ? mask[k] != 0 : (k == P || q > 0);
      bias[q * keys + k] = allowed ? 0.0f : c.mask_value;
    }
  }
  std::memcpy(x_.data<float>(), noise_.data(), x_.nbytes());
  std::memcpy(state_.data<float>(), state_values_.data(), state_.nbytes());
  begin_ms_ = ctx.ElapsedMs();
  return Status::Ok();
}

Result<pipeline::StepResult> PolicyWorker::Step(pipeline::StepContext& ctx) {
  using pipeline::StepResult;
  const PolicyConfig& c = config_;
  // Euler from t = 1 to 0 in num_steps steps (transformers' sample_actions: t = 1 + k dt, in
  // double, then float32).
  const double dt = -1.0 / double(c.num_steps);
  const auto t = float(1.0 + double(step_) * dt);
  // The time step's sinusoidal embedding: [sin(freq t), cos(freq t)], the product in float32.
  float* emb = time_emb_.data<float>();
  const size_t half = c.time_freq.size();
  for (size_t j = 0; j < half; ++j) {
    const float angle = c.time_freq[j] * t;
    emb[j] = float(std::sin(double(angle)));
    emb[half + j] = float(std::cos(double(angle)));
  }
  double ms = 0;
  OE_RETURN_IF_ERROR(Run(*expert_, &ms));
  step_ms_.push_back(ms);
  float* x = x_.data<float>();
  const float* v = velocity_.data<float>();
  const auto dtf = float(dt);
  for (int64_t i = 0; i < c.chunk_size * c.action_dim; ++i) x[i] += dtf * v[i];
  if (++step_ < c.num_steps) return StepResult::Continue();
  OE_ASSIGN_OR_RETURN(pipeline::Output out, ActionEvent(NowUnixMs()));
  OE_ASSIGN_OR_RETURN(bool delivered, ctx.Emit(std::move(out)));
  emitted_ = delivered;
  return StepResult::Finish("done");
}

Result<pipeline::Output> PolicyWorker::ActionEvent(double produced_ms) {
  const PolicyConfig& c = config_;
  age_at_emission_ms_ = produced_ms - timestamp_ms_;
  if (deadline_ms_ > 0) {
    lateness_ms_ = produced_ms - (timestamp_ms_ + deadline_ms_);
    deadline_missed_ = lateness_ms_ > 0;
  }
  return pipeline::ActionEvent(c.actions, c.identity, x_.data<float>(), c.chunk_size, c.action_dim, c.action_dim,
                             {timestamp_ms_, produced_ms, deadline_ms_, age_at_start_ms_}, {{"timings", Inspect()["timings"]}});
}

Json PolicyWorker::Metrics(const pipeline::StepContext& ctx) const {
  Json out = Inspect();
  out["timings"]["total_ms"] = ctx.ElapsedMs();
  return out;
}

Json PolicyWorker::Inspect() const {
  double denoise = 0;
  for (double ms : step_ms_) denoise += ms;
  return {{"action_emitted", emitted_},
          {"steps", int64_t(step_ms_.size())},
          {"observation_age_ms", {{"at_start", age_at_start_ms_}, {"at_emission", emitted_ ? Json(age_at_emission_ms_) : Json()}}},
          {"deadline_ms", deadline_ms_},
          {"deadline_missed", deadline_missed_},
          {"timings", {{"preprocess_ms", preprocess_ms_}, {"vision_ms", vision_ms_}, {"prefix_ms", prefix_ms_},
                       {"step_ms", step_ms_}, {"denoise_ms", denoise}}}};
}

std::vector<Placement> PolicyWorker::placements() const {
  return {vision_->placement(), prefix_->placement(), expert_->placement()};
}

Json PolicyWorker::Describe() const {
  const PolicyConfig& c = config_;
  return {{"cameras", c.cameras}, {"image_size", c.image_size}, {"state_dim", c.state_dim}, {"action_dim", c.action_dim},
          {"chunk_size", c.chunk_size}, {"num_steps", c.num_steps}, {"max_observation_age_ms", c.max_observation_age_ms},
          {"actions", {{"schema_version", c.actions.schema_version}, {"names", c.actions.names}, {"units", c.actions.units},
                       {"dt_ms", c.actions.dt_ms}}},
          {"model", c.identity}};
}

}  // namespace omni_edge::policy
