#include "families/llm/config.h"

#include <filesystem>

#include "pipeline/request.h"

namespace omni_edge::llm {
namespace {

Status CheckGraphs(const StagePlan& s, const LlmConfig& c, const std::string& where) {
  OE_RETURN_IF_ERROR(RequireGraphs(s, where, "embed", {"chunk", "step"}));
  OE_RETURN_IF_ERROR(RequireGraphs(s, where, "lm_head", {"step"}));
  for (const char* role : {"prefill", "decode"}) {
    OE_RETURN_IF_ERROR(RequireGraphs(s, where, role, {}));
    for (int64_t cache : decoding::CacheSizes(c.decoder)) {
      if (s.graphs.at(role).graphs.count(std::to_string(cache)) == 0) {
        return PlanError(where + ".graphs." + role + ".graphs." + std::to_string(cache) + ": no graph for a cache of " +
                         std::to_string(cache) + " slots");
      }
    }
  }
  return Status::Ok();
}

}  // namespace

Result<std::shared_ptr<const LlmConfig>> ParseLlm(const Json& j, const StagePlan& stage, const std::string& where) {
  auto c = std::make_shared<LlmConfig>();
  FieldReader r(j, where);
  c->tokenizer = ResolvePath(stage.artifact, r.String("tokenizer"));
  c->chat_format = r.String("chat_format");
  const Json* stops = r.Array("stop_tokens");
  const decoding::DecoderSections sections = decoding::ReadDecoderFields(r, c->decoder);
  const Json* sampling = r.Object("sampling", false);
  c->max_new_tokens = r.Int("max_new_tokens", false, 1, 256);
  const Json* media = r.Object("media", false);
  const std::string generation_prompt = r.String("chat_generation_prompt", false, false, "");
  c->closing_state = r.Bool("closing_state", false, false);
  if (!r.ok()) return r.status();
  OE_RETURN_IF_ERROR(r.Done());
  for (size_t i = 0; i < stops->size(); ++i) {
    if (!(*stops)[i].is_string()) return PlanError(where + ".stop_tokens[" + std::to_string(i) + "]: expected a string");
    c->stop_tokens.push_back((*stops)[i].get<std::string>());
  }
  c->chat = text::ChatFormatNamed(c->chat_format);
  if (!c->chat && c->chat_format != "none") {
    return PlanError(where + ".chat_format: must be chatml, llama3 or none, got '" + c->chat_format + "'");
  }
  if (c->chat) c->chat->generation_prompt = generation_prompt;
  OE_RETURN_IF_ERROR(decoding::ParseSections(sections, where, c->decoder));
  if (!std::filesystem::is_regular_file(c->tokenizer)) {
    return Status::Error("file_missing", where + ".tokenizer: " + c->tokenizer);
  }
  if (sampling != nullptr) {
    OE_ASSIGN_OR_RETURN(c->sampling, pipeline::SamplingFromJson(*sampling, where + ".sampling"));
  }
  if (stage.execution_type != "llm_ar") return PlanError(where + ": an llm stage is llm_ar");
  if (media != nullptr) {
    FieldReader m(*media, where + ".media");
    c->media_config = ResolvePath(stage.artifact, m.String("config"));
    c->media_style = m.String("style", false, true, "qwen2.5-omni");
    OE_RETURN_IF_ERROR(m.Done());
    if (!std::filesystem::is_regular_file(c->media_config)) {
      return Status::Error("file_missing", where + ".media.config: " + c->media_config);
    }
    if (c->media_style != "qwen2.5-omni" && c->media_style != "minicpmo") {
      return PlanError(where + ".media.style: must be qwen2.5-omni or minicpmo, got '" + c->media_style + "'");
    }
    // Qwen2.5-Omni's thinker reads M-RoPE (three position rows); MiniCPM-o's plain positions.
    const int64_t rows = c->media_style == "minicpmo" ? 1 : 3;
    if (c->decoder.position_rows != rows) {
      return PlanError(where + ".media: a " + c->media_style + " thinker's decoder has position_rows " + std::to_string(rows));
    }
  } else if (!stage.input_sources.empty()) {
    return PlanError(where + ": an llm stage without media reads the request's text, not other stages (input_sources)");
  }
  OE_RETURN_IF_ERROR(CheckGraphs(stage, *c, where.substr(0, where.rfind('.'))));
  return std::shared_ptr<const LlmConfig>(std::move(c));
}

}  // namespace omni_edge::llm
