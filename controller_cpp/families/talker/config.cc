#include "families/talker/config.h"

#include <filesystem>

#include "pipeline/request.h"

namespace omni_edge::talker {
namespace {

Result<std::vector<PromptRow>> ParsePromptRows(const Json* rows, const std::string& where, int64_t codec_vocab) {
  std::vector<PromptRow> out;
  if (rows == nullptr) return out;
  for (size_t i = 0; i < rows->size(); ++i) {
    const std::string at = where + "[" + std::to_string(i) + "]";
    const Json& row = (*rows)[i];
    if (!row.is_array() || row.size() != 2) return PlanError(at + ": expected [text id, codec id]");
    PromptRow r;
    OE_RETURN_IF_ERROR(CheckInt(row[0], at + "[0]", 0, &r.text_id));
    OE_RETURN_IF_ERROR(CheckInt(row[1], at + "[1]", PromptRow::kTextOnly, &r.codec_id));
    if (r.codec_id >= codec_vocab) {
      return PlanError(at + "[1]: codec id " + std::to_string(r.codec_id) + " is outside codebook 0's vocabulary (" +
                       std::to_string(codec_vocab) + ")");
    }
    out.push_back(r);
  }
  return out;
}

Result<TalkerPrompt> ParsePrompt(const Json* j, const std::string& where, const TalkerConfig& c) {
  TalkerPrompt p;
  if (j == nullptr) {  // the local layout's prompt
    p.text_codec = c.codec_pad;
    p.frame_text = c.text_pad_id;
    p.tail = {{c.text_pad_id, c.codec_bos}};
    return p;
  }
  FieldReader r(*j, where);
  const Json* head = r.Array("head");
  p.text_codec = r.Int("text_codec", true, 0);
  const Json* tail = r.Array("tail");
  p.frame_text = r.Int("frame_text", true, 0);
  p.stream_text = r.Bool("stream_text", false, false);
  p.text_end = r.Int("text_end", false, -1, -1);
  if (!r.ok()) return r.status();
  OE_RETURN_IF_ERROR(r.Done());
  if (p.text_codec >= c.decoder.vocab_size) return PlanError(where + ".text_codec: outside codebook 0's vocabulary");
  OE_ASSIGN_OR_RETURN(p.head, ParsePromptRows(head, where + ".head", c.decoder.vocab_size));
  OE_ASSIGN_OR_RETURN(p.tail, ParsePromptRows(tail, where + ".tail", c.decoder.vocab_size));
  if (!p.stream_text && p.text_end >= 0) return PlanError(where + ".text_end: only with stream_text");
  return p;
}

Status CheckGraphs(const StagePlan& s, const TalkerConfig& c, const std::string& where) {
  OE_RETURN_IF_ERROR(RequireGraphs(s, where, "embed", {"chunk", "step"}));
  OE_RETURN_IF_ERROR(RequireGraphs(s, where, "head", {"step"}));
  std::vector<std::string> caches;
  for (int64_t b : decoding::CacheSizes(c.decoder)) caches.push_back(std::to_string(b));
  OE_RETURN_IF_ERROR(RequireGraphs(s, where, "prefill", caches));
  OE_RETURN_IF_ERROR(RequireGraphs(s, where, "decode", caches));
  OE_RETURN_IF_ERROR(RequireGraphs(s, where, "predictor_embed", {"step"}));
  std::vector<std::string> slots;
  for (int64_t b : c.predictor.kv.buckets) slots.push_back(std::to_string(b));
  OE_RETURN_IF_ERROR(RequireGraphs(s, where, "predictor_decode", slots));
  return RequireGraphs(s, where, "predictor_head", {"step"});
}

}  // namespace

Result<std::shared_ptr<const TalkerConfig>> ParseTalker(const Json& j, const StagePlan& stage, const std::string& where) {
  FieldReader r(j, where);
  auto config = std::make_shared<TalkerConfig>();
  TalkerConfig& c = *config;
  c.tokenizer = ResolvePath(stage.artifact, r.String("tokenizer"));
  c.text_pad_id = r.Int("text_pad_id", true, 0);
  c.code_groups = r.Int("code_groups", true, 2);
  c.codebook_size = r.Int("codebook_size", true, 1);
  const Json* ids = r.Object("codec_ids");
  c.max_frames = r.Int("max_frames", false, 1, 1500);
  c.min_frames = r.Int("min_frames", false, 0, 0);
  const Json* prompt = r.Object("prompt", false);
  const Json* sampling = r.Object("sampling", false);
  const Json* decoder = r.Object("decoder");
  const Json* predictor = r.Object("predictor");
  if (!r.ok()) return r.status();
  OE_RETURN_IF_ERROR(r.Done());
  FieldReader i(*ids, where + ".codec_ids");
  c.codec_pad = i.Int("pad", true, 0);
  c.codec_bos = i.Int("bos", true, 0);
  c.codec_eos = i.Int("eos", true, 0);
  OE_RETURN_IF_ERROR(i.Done());
  OE_ASSIGN_OR_RETURN(c.decoder, decoding::ParseDecoder(*decoder, where + ".decoder"));
  OE_ASSIGN_OR_RETURN(c.predictor, decoding::ParseDecoder(*predictor, where + ".predictor"));
  if (sampling != nullptr) {
    OE_ASSIGN_OR_RETURN(c.sampling, pipeline::SamplingFromJson(*sampling, where + ".sampling"));
  }
  for (int64_t id : {c.codec_pad, c.codec_bos, c.codec_eos}) {
    if (id < c.codebook_size || id >= c.decoder.vocab_size) {
      return PlanError(where + ".codec_ids: special ids lie past the codebook and inside the talker vocabulary (" +
                       std::to_string(c.codebook_size) + ".." + std::to_string(c.decoder.vocab_size - 1) + "), got " +
                       std::to_string(id));
    }
  }
  if (c.predictor.vocab_size != c.codebook_size) return PlanError(where + ".predictor.vocab_size: must equal codebook_size");
  OE_ASSIGN_OR_RETURN(c.prompt, ParsePrompt(prompt, where + ".prompt", c));
  // The predictor runs one position at a time over the talker hidden and codes 0..G-2.
  if (c.predictor.prefill_chunk != 1 || c.predictor.kv.mode != "full" || c.predictor.kv.buckets.back() < c.code_groups) {
    return PlanError(where + ".predictor: needs prefill_chunk 1 and a full KV bucket of at least code_groups (" +
                     std::to_string(c.code_groups) + ") slots");
  }
  if (!std::filesystem::is_regular_file(c.tokenizer)) return Status::Error("file_missing", where + ".tokenizer: " + c.tokenizer);
  if (stage.input_sources.size() > 1) {
    return PlanError(where + ": a talker reads the request's text or one stage's hidden states (input_sources)");
  }
  OE_RETURN_IF_ERROR(CheckGraphs(stage, c, where.substr(0, where.rfind('.'))));
  return std::shared_ptr<const TalkerConfig>(std::move(config));
}


}  // namespace omni_edge::talker
