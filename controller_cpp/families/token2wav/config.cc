#include "families/token2wav/config.h"

#include <filesystem>

namespace omni_edge::token2wav {
namespace {

constexpr int64_t kMaxSize = 1 << 20;     // any count or width this section names
constexpr int64_t kMaxElements = 1 << 26;  // a cache's elements (per frame for an attention cache)

// Sizes of at least `minimum` each, at most kMaxSize, whose product (skipping `skip`) is at most
// kMaxElements: checked one by one, so the product never overflows.
Status ReadShape(const Json* j, const std::string& where, size_t min_rank, size_t max_rank, int64_t skip,
                 std::vector<int64_t>* out) {
  if (j == nullptr || !j->is_array() || j->size() < min_rank || j->size() > max_rank) {
    return PlanError(where + ": a list of " + std::to_string(min_rank) + " to " + std::to_string(max_rank) + " sizes");
  }
  out->clear();
  int64_t elements = 1;
  for (size_t i = 0; i < j->size(); ++i) {
    int64_t v = 0;
    const bool frames = int64_t(i) == skip;
    OE_RETURN_IF_ERROR(CheckInt((*j)[i], where + "[" + std::to_string(i) + "]", frames ? 0 : 1, &v));
    if (v > kMaxSize) return PlanError(where + ": a size above " + std::to_string(kMaxSize));
    if (!frames) {
      elements *= v;
      if (elements > kMaxElements) return PlanError(where + ": more than " + std::to_string(kMaxElements) + " elements");
    }
    out->push_back(v);
  }
  if (skip >= 0 && (*out)[size_t(skip)] != 0) return PlanError(where + "[3]: the frame axis starts empty (0)");
  return Status::Ok();
}

std::string Sibling(const std::string& index) {
  return std::filesystem::path(index).replace_extension(".bin").string();
}

}  // namespace

std::vector<std::string> Token2WavConfig::files() const {
  std::vector<std::string> out = {noise, Sibling(noise)};
  for (const auto& [name, path] : voices) {
    out.push_back(path);
    out.push_back(Sibling(path));
  }
  return out;
}

Result<std::shared_ptr<const Token2WavConfig>> ParseToken2Wav(const Json& j, const StagePlan& stage,
                                                              const std::string& where) {
  FieldReader r(j, where);
  auto config = std::make_shared<Token2WavConfig>();
  Token2WavConfig& c = *config;
  c.sample_rate = r.Int("sample_rate", true, 1);
  c.samples_per_frame = r.Int("samples_per_frame", true, 1);
  c.window = r.Int("window", true, 1);
  c.context = r.Int("context", true, 1);
  c.silence = r.Int("silence", true, 0);
  c.vocab = r.Int("vocab", true, 1);
  c.mel_bins = r.Int("mel_bins", true, 1);
  c.mel_cache = r.Int("mel_cache", true, 1);
  c.source_cache = r.Int("source_cache", true, 1);
  c.keep_recent = r.Int("keep_recent", true, 1);
  const Json* times = r.Array("times");
  const Json* encoder = r.Object("encoder");
  const Json* estimator = r.Object("estimator");
  const std::string noise = r.String("noise");
  const Json* voices = r.Object("voices");
  c.voice = r.String("voice", false, true, "default");
  c.pcm_dtype = r.String("pcm_dtype", false, true, "float32");
  c.noise_seed = uint64_t(r.Int("noise_seed", false, 0, 0));
  if (!r.ok()) return r.status();
  OE_RETURN_IF_ERROR(r.Done());
  for (int64_t v : {c.sample_rate, c.samples_per_frame, c.window, c.context, c.silence, c.vocab, c.mel_bins, c.mel_cache,
                    c.source_cache, c.keep_recent}) {
    if (v > kMaxSize) return PlanError(where + ": a size above " + std::to_string(kMaxSize));
  }
  if (c.silence >= c.vocab) return PlanError(where + ".silence: must be a code below vocab");
  // The encoder halves a cache's frames (its first blocks see every other frame): kept even.
  if (c.keep_recent % 2 != 0) return PlanError(where + ".keep_recent: must be even");
  if (c.source_cache > c.mel_cache * c.samples_per_frame) {
    return PlanError(where + ".source_cache: at most mel_cache x samples_per_frame samples");
  }
  if (times->size() < 2 || times->size() > 1001) return PlanError(where + ".times: 2 to 1001 points");
  for (size_t i = 0; i < times->size(); ++i) {
    const Json& t = (*times)[i];
    if (!t.is_number()) return PlanError(where + ".times[" + std::to_string(i) + "]: a number");
    const double v = t.get<double>();  // range-checked before narrowing
    if (!(v >= 0.0 && v <= 1.0)) return PlanError(where + ".times: ascending within [0, 1]");
    c.times.push_back(float(v));
    if (i > 0 && !(c.times[i] > c.times[i - 1])) return PlanError(where + ".times: ascending within [0, 1]");
  }
  for (const auto& [section, cnn, att] : {std::tuple{encoder, &c.encoder_cnn, &c.encoder_att},
                                          std::tuple{estimator, &c.estimator_cnn, &c.estimator_att}}) {
    const std::string at = where + (section == encoder ? ".encoder" : ".estimator");
    FieldReader s(*section, at);
    const Json* cnn_shape = s.Array("cnn");
    const Json* att_shape = s.Array("att");
    if (!s.ok()) return s.status();
    OE_RETURN_IF_ERROR(s.Done());
    OE_RETURN_IF_ERROR(ReadShape(att_shape, at + ".att", 5, 5, 3, att));
    OE_RETURN_IF_ERROR(ReadShape(cnn_shape, at + ".cnn", 1, 4, -1, cnn));
  }
  c.noise = ResolvePath(stage.artifact, noise);
  for (auto it = voices->begin(); it != voices->end(); ++it) {
    if (!it.value().is_string()) return PlanError(where + ".voices." + it.key() + ": a file name");
    c.voices[it.key()] = ResolvePath(stage.artifact, it.value().get<std::string>());
  }
  if (c.voices.count(c.voice) == 0) return PlanError(where + ".voice: '" + c.voice + "' is not among its voices");
  if (c.pcm_dtype != "float32" && c.pcm_dtype != "int16") {
    return PlanError(where + ".pcm_dtype: must be float32 or int16, got '" + c.pcm_dtype + "'");
  }
  for (const std::string& file : c.files()) {
    if (!std::filesystem::is_regular_file(file)) return Status::Error("file_missing", where + ": " + file + " does not exist");
  }
  const std::string stage_where = where.substr(0, where.rfind('.'));
  if (stage.execution_type != "llm_generation") return PlanError(where + ": a token2wav stage is llm_generation");
  if (stage.input_sources.size() != 1) return PlanError(where + ": a token2wav stage reads the codes of one talker stage");
  OE_RETURN_IF_ERROR(RequireGraphs(stage, stage_where, "encoder", {"window", "last"}));
  OE_RETURN_IF_ERROR(RequireGraphs(stage, stage_where, "estimator", {"step"}));
  OE_RETURN_IF_ERROR(RequireGraphs(stage, stage_where, "hift", {"window"}));
  return std::shared_ptr<const Token2WavConfig>(std::move(config));
}

}  // namespace omni_edge::token2wav
