#include "families/encoder/encoder_worker.h"

#include <chrono>
#include <cstring>

#include "base/platform/os.h"
#include "media/image_decode.h"

namespace omni_edge::encoder {
namespace {

constexpr size_t kMaxMediaBytes = size_t(256) << 20;

// Rows a MiniCPM-o audio piece of `frames` mel frames makes: the stride-2 convolution, then
// average pooling by `pool` (the reference's _get_feat_extract_output_lengths).
int64_t PieceTokens(int64_t frames, int64_t pool) {
  const int64_t encoded = (frames - 1) / 2 + 1;
  return encoded < pool ? 0 : (encoded - pool) / pool + 1;  // Python's floor division: none below one pool
}

double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

std::string GridKey(const std::array<int64_t, 3>& g) {
  return std::to_string(g[0]) + "x" + std::to_string(g[1]) + "x" + std::to_string(g[2]);
}

}  // namespace

Result<std::unique_ptr<EncoderWorker>> EncoderWorker::Open(const StagePlan& stage, BackendPool& backends) {
  const EncoderConfig* config = stage.config_as<EncoderConfig>();
  if (config == nullptr) return Status::Error("internal", "stage " + std::to_string(stage.stage_id) + " is not an encoder stage");
  std::unique_ptr<EncoderWorker> w(new EncoderWorker());
  w->config_ = *config;
  const EncoderConfig& c = w->config_;
  OE_RETURN_IF_ERROR(w->ReadPreprocessor());
  const GraphGroup& group = stage.graphs.at("encoder");
  for (const auto& [key, ref] : group.graphs) {
    Bound b;
    const std::string name = c.modality + "_encoder_" + key;
    OE_ASSIGN_OR_RETURN(b.graph, LoadGraph(backends, group, key, name));
    std::vector<TensorView> in, out;
    if (c.minicpm() && c.modality == "image") {
      const auto size = ParseSliceSize(key).value();
      const int64_t P = w->slicing_.patch_size;
      b.input = HostTensor(DType::kFloat32, {1, 3, P, size[0] * size[1] * P});
      b.output = HostTensor(DType::kFloat32, {1, c.query_num, c.hidden_size});
      in = {b.input.view()};
    } else if (c.minicpm()) {
      const int64_t frames = std::stoll(key);  // the plan's keys are checked numbers
      b.input = HostTensor(DType::kFloat32, {1, c.input_width, frames});
      b.length = HostTensor(DType::kInt64, {1});
      b.output = HostTensor(DType::kFloat32, {1, PieceTokens(frames, c.pool_step), c.hidden_size});
      in = {b.input.view(), b.length.view()};
    } else if (c.modality == "image") {
      const auto grid = ParseGrid(key).value();
      const media::VisionPreprocessing& v = w->vision_;
      const int64_t patches = grid[0] * grid[1] * grid[2], merge = v.merge_size * v.merge_size;
      if (grid[1] % v.merge_size || grid[2] % v.merge_size) {
        return Status::Error("invalid_plan", name + ": the grid is not a multiple of the merge size");
      }
      b.input = HostTensor(DType::kFloat32, {patches, c.input_width});
      b.output = HostTensor(DType::kFloat32, {patches / merge, c.hidden_size});
      in = {b.input.view()};
    } else {
      b.input = HostTensor(DType::kFloat32, {1, c.input_width, c.chunk_frames});
      b.length = HostTensor(DType::kInt64, {1});
      b.output = HostTensor(DType::kFloat32, {1, c.chunk_frames / 4, c.hidden_size});
      in = {b.input.view(), b.length.view()};
    }
    out = {b.output.view()};
    OE_RETURN_IF_ERROR(ExpectIo(*b.graph, name, in, out));
    OE_RETURN_IF_ERROR(b.graph->Bind(in, out));
    w->graphs_.emplace(key, std::move(b));
  }
  return w;
}

Status EncoderWorker::ReadPreprocessor() {
  const std::string& path = config_.preprocessor;
  OE_ASSIGN_OR_RETURN(std::string text, platform::ReadWholeFile(path));
  OE_ASSIGN_OR_RETURN(Json json, ParseJson(text, path));
  int64_t width = 0;
  if (config_.minicpm() && config_.modality == "image") {
    OE_ASSIGN_OR_RETURN(slicing_, media::SliceConfigFromJson(json, path));
    width = 3 * slicing_.patch_size * slicing_.patch_size;
  } else if (config_.modality == "image") {
    OE_ASSIGN_OR_RETURN(vision_, media::VisionPreprocessingFromJson(json, path));
    width = 3 * vision_.temporal_patch_size * vision_.patch_size * vision_.patch_size;
  } else {
    OE_ASSIGN_OR_RETURN(audio_, media::AudioFeaturesFromJson(json, path));
    width = audio_.feature_size;
  }
  if (width != config_.input_width) {
    return Status::Error("invalid_plan", "the encoder's input_width is " + std::to_string(config_.input_width) + " but " +
                                             path + " makes rows of " + std::to_string(width));
  }
  return Status::Ok();
}

Status EncoderWorker::Prepare(const pipeline::Request& r) {
  items_.clear();
  for (size_t i = 0; i < r.media.size(); ++i) {
    const pipeline::MediaInput& m = r.media[i];
    if (m.kind != config_.modality) continue;
    std::string bytes = m.data;
    if (bytes.empty()) {
      auto read = platform::ReadWholeFile(m.path);
      if (!read.ok()) return Status::Error("invalid_media", "media[" + std::to_string(i) + "]: " + read.status().message());
      bytes = std::move(read.value());
    }
    if (bytes.size() > kMaxMediaBytes) {
      return Status::Error("invalid_media", "media[" + std::to_string(i) + "]: a file of more than 256 MB");
    }
    items_.emplace_back(int64_t(i), std::move(bytes));
  }
  return Status::Ok();
}

Status EncoderWorker::Begin(pipeline::StepContext& ctx) {
  next_ = 0;
  preprocess_ms_ = encode_ms_ = 0;
  tokens_ = 0;
  forward_.clear();
  for (size_t i = 0; i < ctx.input_count(); ++i) {  // the encoders before this one (a serial plan)
    while (auto in = ctx.Next(i)) {
      if (in->kind == "embeddings") forward_.push_back(std::move(*in));
    }
  }
  waited_ms_ = ctx.ElapsedMs();
  return Status::Ok();
}

Status EncoderWorker::Run(Bound& b) {
  const auto start = std::chrono::steady_clock::now();
  Status st = b.graph->Run();
  encode_ms_ += MsSince(start);
  return st;
}

Result<std::vector<float>> EncoderWorker::EncodeImage(const std::string& bytes, std::array<int64_t, 3>* grid) {
  const auto start = std::chrono::steady_clock::now();
  OE_ASSIGN_OR_RETURN(media::RgbImage image, media::DecodeImage(bytes));
  OE_ASSIGN_OR_RETURN(media::VisionPatches patches, media::PreprocessImage(image, vision_));
  preprocess_ms_ += MsSince(start);
  *grid = {patches.grid_t, patches.grid_h, patches.grid_w};
  auto it = graphs_.find(GridKey(*grid));
  if (it == graphs_.end()) {
    std::string have;
    for (const auto& [key, b] : graphs_) have += (have.empty() ? "" : ", ") + key;
    return Status::Error("invalid_media", "an image of " + std::to_string(image.width) + "x" + std::to_string(image.height) +
                                              " pixels has the patch grid " + GridKey(*grid) +
                                              "; this plan's vision encoder has graphs for " + have +
                                              " (export with --image-sizes to add one)");
  }
  Bound& b = it->second;
  std::memcpy(b.input.data<float>(), patches.values.data(), b.input.nbytes());
  OE_RETURN_IF_ERROR(Run(b));
  return std::vector<float>(b.output.data<float>(), b.output.data<float>() + b.output.nbytes() / sizeof(float));
}

Result<std::vector<float>> EncoderWorker::EncodeAudio(const std::string& bytes) {
  const auto start = std::chrono::steady_clock::now();
  OE_ASSIGN_OR_RETURN(media::LogMel mel, media::AudioFeatures(bytes, audio_));
  preprocess_ms_ += MsSince(start);
  audio_seconds_ = double(mel.frames * audio_.hop_length) / double(audio_.sampling_rate);
  Bound& b = graphs_.at("chunk");
  const int64_t F = config_.chunk_frames, H = config_.hidden_size;
  std::vector<float> rows;
  for (int64_t at = 0; at < mel.frames; at += F) {
    // The chunks transformers cuts: F frames each, the last one shorter (zero-padded, masked).
    const int64_t n = std::min(F, mel.frames - at);
    float* in = b.input.data<float>();
    std::memset(in, 0, b.input.nbytes());
    for (int64_t m = 0; m < mel.mel; ++m) std::memcpy(in + m * F, mel.values.data() + m * mel.frames + at, size_t(n) * sizeof(float));
    b.length.data<int64_t>()[0] = n;
    OE_RETURN_IF_ERROR(Run(b));
    const int64_t tokens = ((n - 1) / 2 + 1) / 2;
    rows.insert(rows.end(), b.output.data<float>(), b.output.data<float>() + tokens * H);
  }
  if (rows.empty()) {  // fewer than 3 frames: the encoder's stride-2 convolution and pooling leave no token
    const int64_t least = 2 * audio_.hop_length + 1;
    return Status::Error("invalid_media", "the audio is too short: " + std::to_string(mel.frames) +
                                              " frame(s) give no audio token; it must hold at least " + std::to_string(least) +
                                              " samples at " + std::to_string(audio_.sampling_rate) + " Hz (" +
                                              std::to_string(least * 1000 / audio_.sampling_rate + 1) + " ms)");
  }
  return rows;
}

Result<std::vector<float>> EncoderWorker::EncodeSlices(const std::string& bytes, std::array<int64_t, 3>* grid) {
  const auto start = std::chrono::steady_clock::now();
  OE_ASSIGN_OR_RETURN(media::RgbImage image, media::DecodeImage(bytes));
  OE_ASSIGN_OR_RETURN(media::SlicedImage sliced, media::SliceImage(image, slicing_));
  preprocess_ms_ += MsSince(start);
  *grid = {int64_t(sliced.slices.size()), sliced.grid_cols, sliced.grid_rows};
  std::vector<float> rows;
  for (const media::ImageSlice& s : sliced.slices) {
    const std::string key = std::to_string(s.rows) + "x" + std::to_string(s.cols);
    auto it = graphs_.find(key);
    if (it == graphs_.end()) {
      std::string have;
      for (const auto& [k, b] : graphs_) have += (have.empty() ? "" : ", ") + k;
      return Status::Error("invalid_media", "an image of " + std::to_string(image.width) + "x" + std::to_string(image.height) +
                                                " pixels has a slice of " + key + " patches; this plan's vision encoder has graphs for " +
                                                have + " (export with --image-sizes to add one)");
    }
    Bound& b = it->second;
    std::memcpy(b.input.data<float>(), s.strip.data(), b.input.nbytes());
    OE_RETURN_IF_ERROR(Run(b));
    rows.insert(rows.end(), b.output.data<float>(), b.output.data<float>() + b.output.nbytes() / sizeof(float));
  }
  return rows;
}

Result<std::vector<float>> EncoderWorker::EncodeAudioPieces(const std::string& bytes) {
  const auto start = std::chrono::steady_clock::now();
  OE_ASSIGN_OR_RETURN(media::Pcm pcm, media::DecodeWav(bytes));
  OE_ASSIGN_OR_RETURN(std::vector<float> samples, media::Resample(pcm.samples, pcm.rate, audio_.sampling_rate));
  std::vector<media::LogMel> pieces;  // each n_samples (30 s) piece on its own, as the reference
  for (size_t at = 0; at < samples.size(); at += size_t(audio_.n_samples)) {
    const size_t end = std::min(samples.size(), at + size_t(audio_.n_samples));
    OE_ASSIGN_OR_RETURN(media::LogMel mel, media::WhisperLogMel({samples.begin() + long(at), samples.begin() + long(end)}, audio_));
    pieces.push_back(std::move(mel));
  }
  preprocess_ms_ += MsSince(start);
  audio_seconds_ = double(samples.size()) / double(audio_.sampling_rate);
  const int64_t H = config_.hidden_size;
  std::vector<float> rows;
  for (const media::LogMel& mel : pieces) {
    // The smallest bucket that holds the piece (its graph's input is that many frames).
    Bound* chosen = nullptr;
    int64_t F = 0;
    for (auto& [key, bound] : graphs_) {
      const int64_t frames = bound.input.shape()[2];
      if (frames >= mel.frames && (chosen == nullptr || frames < F)) chosen = &bound, F = frames;
    }
    if (chosen == nullptr) {
      return Status::Error("invalid_plan", "an audio piece of " + std::to_string(mel.frames) + " frames exceeds the largest graph's " +
                                               std::to_string(config_.chunk_frames));
    }
    Bound& b = *chosen;
    const int64_t tokens = PieceTokens(mel.frames, config_.pool_step);
    if (tokens < 1) continue;  // a tail too short for one row, as the reference keeps none
    float* in = b.input.data<float>();
    std::memset(in, 0, b.input.nbytes());
    for (int64_t m = 0; m < mel.mel; ++m) std::memcpy(in + m * F, mel.values.data() + m * mel.frames, size_t(mel.frames) * sizeof(float));
    b.length.data<int64_t>()[0] = mel.frames;
    OE_RETURN_IF_ERROR(Run(b));
    rows.insert(rows.end(), b.output.data<float>(), b.output.data<float>() + tokens * H);
  }
  if (rows.empty()) return Status::Error("invalid_media", "the audio is too short for one audio token (it needs 100 ms)");
  return rows;
}

Result<pipeline::StepResult> EncoderWorker::Step(pipeline::StepContext& ctx) {
  using pipeline::StepResult;
  if (!forward_.empty()) {  // the earlier encoders' rows, passed on first
    pipeline::Output out{forward_.front().kind, forward_.front().fields, std::move(forward_.front().payloads), 0};
    forward_.erase(forward_.begin());
    OE_RETURN_IF_ERROR(ctx.Emit(std::move(out)).status());
    return StepResult::Continue();
  }
  if (next_ >= items_.size()) return StepResult::Finish("done");
  const auto& [index, bytes] = items_[next_++];
  std::array<int64_t, 3> grid{};
  const double preprocess_before = preprocess_ms_, encode_before = encode_ms_;
  auto rows = config_.modality == "image" ? (config_.minicpm() ? EncodeSlices(bytes, &grid) : EncodeImage(bytes, &grid))
                                          : (config_.minicpm() ? EncodeAudioPieces(bytes) : EncodeAudio(bytes));
  if (!rows.ok()) return Status::Error(rows.status().reason(), "media[" + std::to_string(index) + "]: " + rows.status().message());
  const int64_t tokens = int64_t(rows->size()) / config_.hidden_size;
  tokens_ += tokens;
  pipeline::Output out;
  out.kind = "embeddings";
  out.fields = {{"media_index", index}, {"modality", config_.modality}, {"tokens", tokens},
                {"preprocess_ms", preprocess_ms_ - preprocess_before}, {"encode_ms", encode_ms_ - encode_before}};
  if (config_.modality == "image") out.fields["grid"] = {grid[0], grid[1], grid[2]};
  if (config_.modality == "audio") out.fields["seconds"] = audio_seconds_;
  out.payloads.push_back({"embeds", "float32", {tokens, config_.hidden_size},
                          std::string(reinterpret_cast<const char*>(rows->data()), rows->size() * sizeof(float))});
  OE_RETURN_IF_ERROR(ctx.Emit(std::move(out)).status());
  return next_ >= items_.size() ? StepResult::Finish("done") : StepResult::Continue();
}

Json EncoderWorker::Metrics(const pipeline::StepContext& ctx) const {
  Json out = Inspect();
  out["total_ms"] = ctx.ElapsedMs();
  return out;
}

std::vector<Placement> EncoderWorker::placements() const {
  std::vector<Placement> out;
  for (const auto& [key, b] : graphs_) out.push_back(b.graph->placement());
  return out;
}

Json EncoderWorker::Inspect() const {
  return {{"items", int64_t(items_.size())}, {"tokens", tokens_}, {"waited_ms", waited_ms_},
          {"preprocess_ms", preprocess_ms_}, {"encode_ms", encode_ms_}};
}

Json EncoderWorker::Describe() const {
  Json graphs = Json::array();
  for (const auto& [key, b] : graphs_) graphs.push_back(key);
  return {{"modality", config_.modality}, {"graphs", graphs}, {"hidden_size", config_.hidden_size}};
}

}  // namespace omni_edge::encoder
