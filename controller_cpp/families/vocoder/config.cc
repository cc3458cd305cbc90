#include "families/vocoder/config.h"

#include <algorithm>

namespace omni_edge::vocoder {

Result<std::shared_ptr<const VocoderConfig>> ParseVocoder(const Json& j, const StagePlan& stage, const std::string& where) {
  FieldReader r(j, where);
  auto config = std::make_shared<VocoderConfig>();
  VocoderConfig& c = *config;
  c.code_groups = r.Int("code_groups", true, 1);
  c.samples_per_frame = r.Int("samples_per_frame", true, 1);
  // Bounded before any arithmetic: a window is at most this many frames.
  constexpr int64_t kMaxFrames = 100000;
  c.sample_rate = r.Int("sample_rate", true, 1);
  c.tail_samples = r.Int("tail_samples", true, 0);
  c.first_chunk = r.Int("first_chunk", true, 1);
  c.chunk = r.Int("chunk", true, 1);
  c.left_context = r.Int("left_context", true, 0);
  const Json* windows = r.Array("windows");
  c.pcm_dtype = r.String("pcm_dtype", false, true, "float32");
  const Json* schedule = r.Object("schedule", false);
  if (!r.ok()) return r.status();
  OE_RETURN_IF_ERROR(r.Done());
  if (schedule != nullptr) {
    FieldReader s(*schedule, where + ".schedule");
    const std::string policy = s.String("policy");
    c.schedule.adaptive = policy == "adaptive";
    if (c.schedule.adaptive) {
      c.schedule.growth = s.Number("growth", false, c.schedule.growth);
      c.schedule.margin_ms = s.Number("margin_ms", false, c.schedule.margin_ms);
    }
    if (!s.ok()) return s.status();
    OE_RETURN_IF_ERROR(s.Done());
    if (policy != "fixed" && policy != "adaptive") {
      return PlanError(where + ".schedule.policy: must be fixed or adaptive, got '" + policy + "'");
    }
    if (!(c.schedule.growth >= 1.0 && c.schedule.growth <= 16.0)) return PlanError(where + ".schedule.growth: must be within [1, 16]");
    if (!(c.schedule.margin_ms >= 0 && c.schedule.margin_ms <= 10000)) {
      return PlanError(where + ".schedule.margin_ms: must be within [0, 10000]");
    }
  }
  c.windows.clear();
  for (size_t i = 0; i < windows->size(); ++i) {
    int64_t v = 0;
    OE_RETURN_IF_ERROR(CheckInt((*windows)[i], where + ".windows[" + std::to_string(i) + "]", 1, &v));
    c.windows.push_back(v);
  }
  if (c.windows.empty() || !std::is_sorted(c.windows.begin(), c.windows.end()) ||
      std::adjacent_find(c.windows.begin(), c.windows.end()) != c.windows.end()) {
    return PlanError(where + ".windows: at least one, strictly ascending");
  }
  if (c.pcm_dtype != "float32" && c.pcm_dtype != "int16") {
    return PlanError(where + ".pcm_dtype: must be float32 or int16, got '" + c.pcm_dtype + "'");
  }
  if (c.tail_samples >= c.samples_per_frame) return PlanError(where + ".tail_samples: must be less than samples_per_frame");
  // A WAV header holds the rate (and the byte rate, twice it) in 32 bits; real codecs stop at 48 kHz.
  constexpr int64_t kMaxSampleRate = 384000;
  if (c.sample_rate > kMaxSampleRate) {
    return PlanError(where + ".sample_rate: at most " + std::to_string(kMaxSampleRate) + " Hz, got " + std::to_string(c.sample_rate));
  }
  for (int64_t v : {c.code_groups, c.samples_per_frame, c.first_chunk, c.chunk, c.left_context, c.windows.back()}) {
    if (v > kMaxFrames) return PlanError(where + ": a size above " + std::to_string(kMaxFrames));
  }
  // The tail of a chunk is emitted from the window of the next one: it needs a frame of context.
  if (c.tail_samples > 0 && c.left_context < 1) return PlanError(where + ".left_context: at least 1 when tail_samples > 0");
  const int64_t full = c.left_context + std::max(c.first_chunk, c.chunk) + 1;
  if (c.windows.back() != full) {
    return PlanError(where + ".windows: the largest must be left_context + max(first_chunk, chunk) + 1 = " +
                     std::to_string(full) + ", got " + std::to_string(c.windows.back()));
  }
  if (c.windows.front() * c.samples_per_frame <= c.tail_samples) return PlanError(where + ".windows: too small for the tail");
  const std::string stage_where = where.substr(0, where.rfind('.'));
  if (stage.execution_type != "llm_generation") return PlanError(where + ": a vocoder stage is llm_generation");
  if (stage.input_sources.size() != 1) {
    return PlanError(where + ": a vocoder stage reads the codes of one talker stage (input_sources)");
  }
  std::vector<std::string> keys;
  for (int64_t w : c.windows) keys.push_back(std::to_string(w));
  OE_RETURN_IF_ERROR(RequireGraphs(stage, stage_where, "vocoder", keys));
  return std::shared_ptr<const VocoderConfig>(std::move(config));
}


}  // namespace omni_edge::vocoder
