#include "families/codec_lm/config.h"

#include "pipeline/request.h"

namespace omni_edge::codec_lm {

Result<std::shared_ptr<const CodecLmConfig>> ParseCodecLm(const Json& j, const StagePlan& stage, const std::string& where) {
  FieldReader r(j, where);
  auto config = std::make_shared<CodecLmConfig>();
  CodecLmConfig& c = *config;
  const Json* decoder = r.Object("decoder");
  c.end_code = r.Int("end_code", true, 0);
  c.min_codes = r.Int("min_codes", false, 0, 0);
  c.max_codes = r.Int("max_codes", false, 1, 4096);
  c.text_eos = r.Int("text_eos", true, 0);
  c.audio_bos = r.Int("audio_bos", true, 0);
  c.text_vocab = r.Int("text_vocab", true, 1);
  c.span_start = r.Int("span_start", false, -1, -1);
  c.thinker_hidden = r.Int("thinker_hidden", true, 1);
  const Json* sampling = r.Object("sampling", false);
  c.repetition_window = r.Int("repetition_window", false, 0, 16);
  if (!r.ok()) return r.status();
  OE_RETURN_IF_ERROR(r.Done());
  OE_ASSIGN_OR_RETURN(c.decoder, decoding::ParseDecoder(*decoder, where + ".decoder"));
  if (sampling != nullptr) {
    auto parsed = pipeline::SamplingFromJson(*sampling, where + ".sampling");
    if (!parsed.ok()) return PlanError(where + ".sampling: " + parsed.status().message());
    c.sampling = parsed.value();
  }
  constexpr int64_t kMax = 1 << 24;
  if (c.end_code >= c.decoder.vocab_size) return PlanError(where + ".end_code: outside the decoder's vocabulary");
  for (int64_t v : {c.min_codes, c.max_codes, c.thinker_hidden, c.repetition_window, c.text_vocab}) {
    if (v > kMax) return PlanError(where + ": a size above " + std::to_string(kMax));
  }
  if (c.min_codes > c.max_codes) return PlanError(where + ".min_codes: more than max_codes");
  if (c.text_eos >= c.text_vocab || c.audio_bos >= c.text_vocab) {
    return PlanError(where + ".text_eos / audio_bos: must be ids below text_vocab");
  }
  const std::string stage_where = where.substr(0, where.rfind('.'));
  if (stage.execution_type != "llm_ar") return PlanError(where + ": a codec_lm stage is llm_ar");
  if (stage.input_sources.size() != 1) return PlanError(where + ": a codec_lm stage reads one thinker stage (input_sources)");
  std::vector<std::string> caches;
  for (int64_t b : decoding::CacheSizes(c.decoder)) caches.push_back(std::to_string(b));
  OE_RETURN_IF_ERROR(RequireGraphs(stage, stage_where, "decode", caches));
  OE_RETURN_IF_ERROR(RequireGraphs(stage, stage_where, "embed", {"step"}));
  OE_RETURN_IF_ERROR(RequireGraphs(stage, stage_where, "lm_head", {"step"}));
  OE_RETURN_IF_ERROR(RequireGraphs(stage, stage_where, "condition", {"step"}));
  OE_RETURN_IF_ERROR(RequireGraphs(stage, stage_where, "text_embed", {"step"}));
  return std::shared_ptr<const CodecLmConfig>(std::move(config));
}

}  // namespace omni_edge::codec_lm
