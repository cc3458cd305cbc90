#include "families/token2wav/token2wav.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>

#include "base/counter_noise.h"
#include "base/platform/os.h"
#include "runtime/weights_index.h"

namespace omni_edge::token2wav {
namespace {

constexpr double kPi = 3.14159265358979323846;

Status Invalid(const std::string& what) { return Status::Error("invalid_artifact", what); }

// The tensors of an index (weights.json's format) and its data file, by name.
struct TensorFile {
  std::map<std::string, WeightsIndex::Tensor> tensors;
  std::string data;

  Result<const WeightsIndex::Tensor*> Find(const std::string& name, DType dtype, size_t rank, const std::string& where) const {
    auto it = tensors.find(name);
    if (it == tensors.end() || it->second.dtype != dtype || it->second.shape.size() != rank) {
      return Invalid(where + ": no " + DTypeName(dtype) + " tensor '" + name + "' of rank " + std::to_string(rank));
    }
    return &it->second;
  }
  template <typename T>
  std::vector<T> Values(const WeightsIndex::Tensor& t) const {
    std::vector<T> out(t.nbytes / sizeof(T));
    if (t.nbytes > 0) std::memcpy(out.data(), data.data() + t.offset, t.nbytes);
    return out;
  }
};

// An index and its data file, which must be the one beside it with its stem (the file the
// stage's config lists, so the manifest hashed it).
Result<TensorFile> ReadTensorFile(const std::string& index_path) {
  const std::filesystem::path data_path = std::filesystem::path(index_path).replace_extension(".bin").lexically_normal();
  OE_ASSIGN_OR_RETURN(std::string text, platform::ReadWholeFile(index_path));
  OE_ASSIGN_OR_RETURN(Json j, ParseJson(text, index_path));
  TensorFile f;
  OE_ASSIGN_OR_RETURN(f.data, platform::ReadWholeFile(data_path.string()));
  OE_ASSIGN_OR_RETURN(WeightsIndex index, ParseWeightsIndex(j, index_path, int64_t(f.data.size())));  // every tensor inside it
  if (index.data_path != data_path) return Invalid(index_path + ": its data file must be the .bin beside it");
  for (auto& t : index.tensors) f.tensors[t.name] = t;
  return f;
}

TensorView View(const std::vector<float>& v, std::vector<int64_t> shape) {
  return TensorView{const_cast<float*>(v.data()), DType::kFloat32, std::move(shape)};
}

// The DiT's sinusoidal time features (its time embedder before the MLP): cos then sin of
// t x 1000 x 10000^(-i / half), in double: fp16 would lose the time in the cosines of ~1000 rad.
void TimeFeatures(float t, std::vector<float>& out) {
  const size_t half = out.size() / 2;
  for (size_t i = 0; i < half; ++i) {
    const double arg = double(t) * 1000.0 * std::exp(-std::log(10000.0) * double(i) / double(half));
    out[i] = float(std::cos(arg));
    out[half + i] = float(std::sin(arg));
  }
}

// A graph input's static shape: every axis known.
bool StaticShape(const GraphIo& io, const std::vector<int64_t>& want) { return io.shape == want; }

}  // namespace

Result<std::unique_ptr<Token2Wav>> Token2Wav::Create(const StagePlan& stage, BackendPool& backends) {
  const Token2WavConfig* config = stage.config_as<Token2WavConfig>();
  if (config == nullptr) return Status::Error("internal", "stage " + std::to_string(stage.stage_id) + " is not a token2wav stage");
  std::unique_ptr<Token2Wav> t(new Token2Wav(*config));
  OE_RETURN_IF_ERROR(t->Load(stage, backends));
  return t;
}

Status Token2Wav::Load(const StagePlan& stage, BackendPool& backends) {
  const Token2WavConfig& c = config_;
  OE_ASSIGN_OR_RETURN(encoder_, LoadGraph(backends, stage.graphs.at("encoder"), "window", "token2wav_encoder"));
  OE_ASSIGN_OR_RETURN(encoder_last_, LoadGraph(backends, stage.graphs.at("encoder"), "last", "token2wav_encoder_last"));
  OE_ASSIGN_OR_RETURN(estimator_, LoadGraph(backends, stage.graphs.at("estimator"), "step", "token2wav_estimator"));
  OE_ASSIGN_OR_RETURN(hift_, LoadGraph(backends, stage.graphs.at("hift"), "window", "token2wav_hift"));
  if (encoder_->inputs().size() != 3 || encoder_last_->inputs().size() != 3 || estimator_->inputs().size() != 7 ||
      hift_->inputs().size() != 5 || hift_->inputs()[1].shape.size() != 2 || hift_->inputs()[1].shape[1] <= 0) {
    return Invalid(stage.artifact + ": the token2wav graphs do not take the inputs this stage feeds them");
  }
  harmonics_ = hift_->inputs()[1].shape[1];
  constexpr int64_t kMaxHarmonics = 64;  // the release's: 9 (f0 and 8 overtones)
  if (harmonics_ > kMaxHarmonics) return Invalid(stage.artifact + ": HiFT's phase0 is wider than " + std::to_string(kMaxHarmonics));

  const std::string voice_path = c.voices.at(c.voice);
  OE_ASSIGN_OR_RETURN(TensorFile voice, ReadTensorFile(voice_path));
  OE_ASSIGN_OR_RETURN(const WeightsIndex::Tensor* codes, voice.Find("codes", DType::kInt32, 1, voice_path));
  OE_ASSIGN_OR_RETURN(const WeightsIndex::Tensor* speaker, voice.Find("speaker", DType::kFloat32, 1, voice_path));
  OE_ASSIGN_OR_RETURN(const WeightsIndex::Tensor* mel, voice.Find("mel", DType::kFloat32, 2, voice_path));
  voice_codes_ = voice.Values<int32_t>(*codes);
  speaker_ = voice.Values<float>(*speaker);
  prompt_frames_ = mel->shape[0];
  if (int64_t(speaker_.size()) != c.mel_bins || mel->shape[1] != c.mel_bins ||
      prompt_frames_ != 2 * int64_t(voice_codes_.size()) || voice_codes_.empty()) {
    return Invalid(voice_path + ": a voice is codes [P], speaker [" + std::to_string(c.mel_bins) + "] and mel [2P, " +
                   std::to_string(c.mel_bins) + "]");
  }
  for (int32_t code : voice_codes_) {
    if (code < 0 || code >= c.vocab) return Invalid(voice_path + ": a code outside the vocabulary");
  }
  const std::vector<float> rows = voice.Values<float>(*mel);
  voice_mel_.resize(rows.size());
  for (int64_t f = 0; f < prompt_frames_; ++f) {
    for (int64_t b = 0; b < c.mel_bins; ++b) voice_mel_[size_t(b * prompt_frames_ + f)] = rows[size_t(f * c.mel_bins + b)];
  }

  OE_ASSIGN_OR_RETURN(TensorFile noise, ReadTensorFile(c.noise));
  OE_ASSIGN_OR_RETURN(const WeightsIndex::Tensor* n, noise.Find("noise", DType::kFloat32, 2, c.noise));
  noise_frames_ = n->shape[1];
  // The longest reach: the cache (the prompt and keep_recent frames) and a whole window's frames.
  const int64_t reach = prompt_frames_ + c.keep_recent + 2 * (c.window + c.context);
  if (n->shape[0] != c.mel_bins || noise_frames_ < reach) {
    return Invalid(c.noise + ": the flow's noise must be [" + std::to_string(c.mel_bins) + ", >= " + std::to_string(reach) +
                   "] for this voice");
  }
  noise_ = noise.Values<float>(*n);

  OE_RETURN_IF_ERROR(LoadSteady(stage, backends));

  const int64_t fade = 2 * c.source_cache;
  fade_.resize(size_t(fade));
  for (int64_t i = 0; i < fade; ++i) fade_[size_t(i)] = float(0.54 - 0.46 * std::cos(2.0 * kPi * double(i) / double(fade - 1)));
  return Status::Ok();
}

Status Token2Wav::LoadSteady(const StagePlan& stage, BackendPool& backends) {
  const Token2WavConfig& c = config_;
  const auto encoders = stage.graphs.find("steady_encoder"), estimators = stage.graphs.find("steady_estimator");
  if (encoders == stage.graphs.end() && estimators == stage.graphs.end()) return Status::Ok();
  auto keys = [](const auto& group) {
    std::vector<std::string> out;
    for (const auto& [key, ref] : group->second.graphs) out.push_back(key);
    return out;
  };
  if (encoders == stage.graphs.end() || estimators == stage.graphs.end() || keys(encoders) != keys(estimators)) {
    return Invalid(stage.artifact + ": the steady_encoder and steady_estimator groups need graphs for the same cache frames");
  }
  const int64_t m = 2 * c.window, longest = prompt_frames_ + c.keep_recent;
  for (const std::string& key : keys(encoders)) {
    int64_t frames = 0;
    const bool number = !key.empty() && key.size() < 10 && key.find_first_not_of("0123456789") == std::string::npos;
    if (number) frames = std::stoll(key);
    if (!number || frames < prompt_frames_ || frames > longest) {
      return Invalid(stage.artifact + ": steady graphs '" + key + "': the key is the frames their caches hold, from " +
                     std::to_string(prompt_frames_) + " to " + std::to_string(longest) + " for this voice");
    }
    OE_ASSIGN_OR_RETURN(auto encoder, LoadGraph(backends, encoders->second, key, "token2wav_encoder_steady_f" + key));
    OE_ASSIGN_OR_RETURN(auto estimator, LoadGraph(backends, estimators->second, key, "token2wav_estimator_steady_f" + key));
    const auto& enc = encoder->inputs();
    const auto& est = estimator->inputs();
    std::vector<int64_t> enc_att = c.encoder_att, est_att = c.estimator_att;
    enc_att[3] = est_att[3] = frames;
    const bool shapes = enc.size() == 3 && est.size() == 7 && StaticShape(enc[0], {1, c.window + c.context}) &&
                        StaticShape(enc[2], enc_att) && StaticShape(est[0], {1, c.mel_bins, m}) &&
                        est[2].shape.size() == 2 && est[2].shape[0] == 1 &&  // t_features [1, K], not t [1]
                        est[2].shape[1] > 0 && est[2].shape[1] % 2 == 0 && StaticShape(est[6], est_att) &&
                        (time_width_ == 0 || est[2].shape[1] == time_width_);
    if (!shapes) {
      return Invalid(stage.artifact + ": the steady graphs '" + key + "' must take " + std::to_string(c.window + c.context) +
                     " codes, " + std::to_string(m) + " frames, t_features and caches of " + key + " frames");
    }
    time_width_ = est[2].shape[1];
    steady_encoders_[frames] = std::move(encoder);
    steady_estimators_[frames] = std::move(estimator);
  }
  return Status::Ok();
}

std::vector<Placement> Token2Wav::placements() const {
  std::vector<Placement> out = {encoder_->placement(), encoder_last_->placement(), estimator_->placement(),
                                hift_->placement()};
  for (const auto& [frames, graph] : steady_encoders_) out.push_back(graph->placement());
  for (const auto& [frames, graph] : steady_estimators_) out.push_back(graph->placement());
  return out;
}

Status Token2Wav::Run(Graph& g, const std::vector<TensorView>& inputs, const std::vector<TensorView>& outputs) {
  OE_RETURN_IF_ERROR(g.Bind(inputs, outputs));
  const auto t0 = std::chrono::steady_clock::now();
  OE_RETURN_IF_ERROR(g.Run());
  graph_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return Status::Ok();
}

Result<std::vector<float>> Token2Wav::Encode(const std::vector<int32_t>& codes, bool last) {
  const int64_t n = int64_t(codes.size()), M = config_.mel_bins;
  const int64_t m = 2 * (last ? n : n - config_.context);
  if (m <= 0) return Status::Error("invalid_argument", "a token2wav window of " + std::to_string(n) + " codes emits nothing");
  std::vector<int64_t> ids(codes.begin(), codes.end());
  Cache& c = encoder_cache_;
  std::vector<float> mu(size_t(M * m));
  const auto steady = steady_encoders_.find(c.att_shape[3]);
  const bool whole = !last && n == config_.window + config_.context && steady != steady_encoders_.end();
  Graph& graph = whole ? *steady->second : last ? *encoder_last_ : *encoder_;
  OE_RETURN_IF_ERROR(Advance(c, m, [&](const TensorView& cnn, const TensorView& att) {
    return Run(graph, {TensorView{ids.data(), DType::kInt64, {1, n}}, View(c.cnn, c.cnn_shape), View(c.att, c.att_shape)},
               {View(mu, {1, M, m}), cnn, att});
  }));
  return mu;
}

Result<std::vector<float>> Token2Wav::Flow(const std::vector<float>& mu, const float* cond) {
  const int64_t M = config_.mel_bins, m = int64_t(mu.size()) / M;
  const int64_t offset = step_caches_.front().att_shape[3];
  if (offset + m > noise_frames_) return Status::Error("internal", "the flow's noise ends before this window");
  std::vector<float> x(size_t(M * m));
  for (int64_t b = 0; b < M; ++b) {
    std::memcpy(&x[size_t(b * m)], &noise_[size_t(b * noise_frames_ + offset)], size_t(m) * sizeof(float));
  }
  const std::vector<float> condition = cond == nullptr ? std::vector<float>(mu.size(), 0.0f)
                                                      : std::vector<float>(cond, cond + mu.size());
  const std::vector<float>& times = config_.times;
  std::vector<float> t = {times[0]};
  float dt = times[1] - times[0];
  std::vector<float> velocity(x.size());
  const auto found = steady_estimators_.find(offset);
  Graph* steady = m == 2 * config_.window && found != steady_estimators_.end() ? found->second.get() : nullptr;
  std::vector<float> features(steady != nullptr ? size_t(time_width_) : 0);
  for (size_t k = 0; k < step_caches_.size(); ++k) {
    Cache& c = step_caches_[k];
    if (steady != nullptr) TimeFeatures(t[0], features);
    const TensorView time = steady != nullptr ? View(features, {1, time_width_}) : View(t, {1});
    OE_RETURN_IF_ERROR(Advance(c, m, [&](const TensorView& cnn, const TensorView& att) {
      return Run(steady != nullptr ? *steady : *estimator_,
                 {View(x, {1, M, m}), View(mu, {1, M, m}), time, View(speaker_, {1, M}), View(condition, {1, M, m}),
                  View(c.cnn, c.cnn_shape), View(c.att, c.att_shape)},
                 {View(velocity, {1, M, m}), cnn, att});
    }));
    for (size_t i = 0; i < x.size(); ++i) x[i] = x[i] + dt * velocity[i];
    t[0] = t[0] + dt;
    if (k + 1 < step_caches_.size()) dt = times[k + 2] - t[0];
  }
  return x;
}

Status Token2Wav::Advance(Cache& c, int64_t m, const std::function<Status(const TensorView&, const TensorView&)>& run) {
  std::vector<int64_t> att_shape = c.att_shape;
  att_shape[3] += m;
  // The graph writes the caches after it beside the ones it reads: into the spare buffers, kept
  // across windows (resized, not reallocated, once they are as long as a window needs).
  c.spare_cnn.resize(c.cnn.size());
  c.spare_att.resize(size_t(NumElements(att_shape)));
  OE_RETURN_IF_ERROR(run(View(c.spare_cnn, c.cnn_shape), View(c.spare_att, att_shape)));
  c.cnn.swap(c.spare_cnn);
  c.att.swap(c.spare_att);
  c.att_shape = att_shape;
  return Status::Ok();
}

void Token2Wav::Trim(Cache& c) const {
  const int64_t frames = c.att_shape[3], keep = prompt_frames_ + config_.keep_recent;
  if (frames <= keep) return;
  const int64_t outer = c.att_shape[0] * c.att_shape[1] * c.att_shape[2], inner = c.att_shape[4];
  std::vector<float>& out = c.spare_att;
  out.resize(size_t(outer * keep * inner));
  for (int64_t o = 0; o < outer; ++o) {
    const float* src = &c.att[size_t(o * frames * inner)];
    float* dst = &out[size_t(o * keep * inner)];
    std::memcpy(dst, src, size_t(prompt_frames_ * inner) * sizeof(float));
    std::memcpy(dst + prompt_frames_ * inner, src + (frames - config_.keep_recent) * inner,
                size_t(config_.keep_recent * inner) * sizeof(float));
  }
  c.att.swap(out);
  c.att_shape[3] = keep;
}

Status Token2Wav::Prompt() {
  const Token2WavConfig& c = config_;
  auto empty = [](const std::vector<int64_t>& cnn, const std::vector<int64_t>& att) {
    Cache cache;
    cache.cnn.assign(size_t(NumElements(cnn)), 0.0f);
    cache.cnn_shape = cnn;
    cache.att_shape = att;  // zero frames
    cache.att.reserve(1);   // a valid pointer for the empty tensor
    return cache;
  };
  encoder_cache_ = empty(c.encoder_cnn, c.encoder_att);
  step_caches_.assign(size_t(c.steps()), empty(c.estimator_cnn, c.estimator_att));
  for (Cache& cache : step_caches_) cache.att.reserve(1);  // copies do not keep the capacity
  std::vector<int32_t> prompt = voice_codes_;
  prompt.insert(prompt.end(), size_t(c.context), int32_t(c.silence));
  OE_ASSIGN_OR_RETURN(std::vector<float> mu, Encode(prompt, /*last=*/false));
  if (int64_t(mu.size()) != c.mel_bins * prompt_frames_) return Status::Error("internal", "the voice prompt's mu has the wrong size");
  OE_RETURN_IF_ERROR(Flow(mu, voice_mel_.data()).status());  // its mel is dropped: the caches are what it leaves
  auto kept = [](const Cache& from) { return Cache{from.cnn, from.att, from.cnn_shape, from.att_shape, {}, {}}; };  // no spares
  prompt_encoder_ = kept(encoder_cache_);
  prompt_steps_.clear();
  for (const Cache& cache : step_caches_) prompt_steps_.push_back(kept(cache));
  prompted_ = true;
  return Status::Ok();
}

Status Token2Wav::Start(uint64_t seed) {
  const Token2WavConfig& c = config_;
  started_ = false;
  if (prompted_) {  // the contents only: each cache keeps its spare buffers
    auto restore = [](Cache& to, const Cache& from) {
      to.cnn = from.cnn;
      to.att = from.att;
      to.cnn_shape = from.cnn_shape;
      to.att_shape = from.att_shape;
    };
    restore(encoder_cache_, prompt_encoder_);
    step_caches_.resize(prompt_steps_.size());
    for (size_t k = 0; k < prompt_steps_.size(); ++k) restore(step_caches_[k], prompt_steps_[k]);
  } else {
    OE_RETURN_IF_ERROR(Prompt());
  }
  mel_tail_.clear();
  mel_tail_frames_ = 0;
  source_tail_.assign(size_t(c.source_cache), 0.0f);
  speech_tail_.clear();
  first_window_ = true;
  seed_ = seed;
  drawn_ = 0;
  started_ = true;
  return Status::Ok();
}

Result<std::vector<float>> Token2Wav::Decode(const std::vector<int32_t>& codes, bool last) {
  if (!started_) return Status::Error("internal", "token2wav: Decode before Start");
  auto out = DecodeWindow(codes, last);
  if (!out.ok()) started_ = false;  // the caches may have advanced part way: the next utterance starts over
  return out;
}

Result<std::vector<float>> Token2Wav::DecodeWindow(const std::vector<int32_t>& codes, bool last) {
  const Token2WavConfig& c = config_;
  for (int32_t code : codes) {
    if (code < 0 || code >= c.vocab) {
      return Status::Error("invalid_input", "token2wav: code " + std::to_string(code) + " is outside [0, " +
                                                std::to_string(c.vocab) + ")");
    }
  }
  OE_ASSIGN_OR_RETURN(std::vector<float> mu, Encode(codes, last));
  OE_ASSIGN_OR_RETURN(std::vector<float> fresh, Flow(mu, nullptr));
  for (Cache& cache : step_caches_) Trim(cache);
  Trim(encoder_cache_);
  // HiFT's window: the carried frames, then the new ones.
  const int64_t M = c.mel_bins, m = int64_t(fresh.size()) / M, T = mel_tail_frames_ + m;
  std::vector<float> mel(size_t(M * T));
  for (int64_t b = 0; b < M; ++b) {
    std::copy_n(mel_tail_.begin() + b * mel_tail_frames_, mel_tail_frames_, mel.begin() + b * T);
    std::copy_n(fresh.begin() + b * m, m, mel.begin() + b * T + mel_tail_frames_);
  }
  const int64_t S = T * c.samples_per_frame, H = harmonics_;
  if (S < c.source_cache) return Status::Error("invalid_argument", "token2wav: a HiFT window shorter than its carried source");
  std::vector<float> phase0(static_cast<size_t>(H)), noise(static_cast<size_t>(S * H));
  for (int64_t i = 0; i < H; ++i) phase0[size_t(i)] = float(counter_noise::Uniform(seed_, drawn_ + uint64_t(i)));
  phase0[0] = 0.0f;
  drawn_ += uint64_t(H);
  for (int64_t i = 0; i < S * H; ++i) noise[size_t(i)] = counter_noise::Normal(seed_, drawn_ + 2 * uint64_t(i));
  drawn_ += 2 * uint64_t(S * H);
  const std::vector<float> keep = {first_window_ ? 0.0f : 1.0f};
  std::vector<float> speech(static_cast<size_t>(S)), source(static_cast<size_t>(S));
  OE_RETURN_IF_ERROR(Run(*hift_,
                         {View(mel, {1, M, T}), View(phase0, {1, H}), View(noise, {1, S, H}),
                          View(source_tail_, {1, 1, c.source_cache}), View(keep, {1})},
                         {View(speech, {1, S}), View(source, {1, 1, S})}));
  const int64_t half = c.source_cache;
  if (!first_window_) {
    for (int64_t i = 0; i < half; ++i) {
      speech[size_t(i)] = speech[size_t(i)] * fade_[size_t(i)] + speech_tail_[size_t(i)] * fade_[size_t(half + i)];
    }
  }
  const int64_t carried = std::min(c.mel_cache, T);
  mel_tail_.resize(size_t(M * carried));
  for (int64_t b = 0; b < M; ++b) std::copy_n(mel.begin() + b * T + (T - carried), carried, mel_tail_.begin() + b * carried);
  mel_tail_frames_ = carried;
  source_tail_.assign(source.end() - half, source.end());
  speech_tail_.assign(speech.end() - half, speech.end());
  first_window_ = false;
  if (!last) speech.resize(size_t(S - half));
  return speech;
}

}  // namespace omni_edge::token2wav
