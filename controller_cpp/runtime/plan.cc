#include "runtime/plan.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace omni_edge {
namespace fs = std::filesystem;
namespace {

Status PlanError(const std::string& what) { return Status::Error("invalid_plan", what); }

std::string Resolve(const std::string& base, const std::string& rel) {
  fs::path p(rel);
  return (p.is_absolute() ? p : fs::path(base) / p).lexically_normal().string();
}

Result<std::vector<int64_t>> IntList(const Json* list, const std::string& where, int64_t minimum) {
  std::vector<int64_t> out;
  if (list == nullptr) return out;
  for (size_t i = 0; i < list->size(); ++i) {
    int64_t v = 0;
    OE_RETURN_IF_ERROR(CheckInt((*list)[i], where + "[" + std::to_string(i) + "]", minimum, &v));
    out.push_back(v);
  }
  return out;
}

Result<GraphRef> ParseGraphRef(const Json& j, const std::string& where, const std::string& artifact) {
  GraphRef ref;
  if (j.is_string()) {
    ref.file = j.get<std::string>();
  } else {
    FieldReader r(j, where);
    ref.file = r.String("file");
    ref.method = r.String("method", false, true);
    OE_RETURN_IF_ERROR(r.Done());
  }
  if (ref.file.empty()) return PlanError(where + ": empty graph file");
  ref.file = Resolve(artifact, ref.file);
  if (!fs::is_regular_file(ref.file)) return Status::Error("file_missing", where + ": " + ref.file + " does not exist");
  return ref;
}

Result<GraphGroup> ParseGroup(const Json& j, const std::string& where, const std::string& artifact) {
  FieldReader r(j, where);
  GraphGroup g;
  g.backend = r.String("backend");
  g.device = r.String("device");
  const Json* options = r.Object("options", false);
  const Json* graphs = r.Object("graphs");
  OE_RETURN_IF_ERROR(r.Done());
  if (g.device != "cpu" && g.device != "gpu" && g.device != "npu") {
    return PlanError(where + ".device: must be cpu, gpu or npu, got '" + g.device + "'");
  }
  if (options != nullptr) {
    for (auto it = options->begin(); it != options->end(); ++it) {
      if (!it.value().is_string()) return PlanError(where + ".options." + it.key() + ": expected a string");
      g.options[it.key()] = it.value().get<std::string>();
    }
  }
  if (graphs->empty()) return PlanError(where + ".graphs: at least one graph");
  for (auto it = graphs->begin(); it != graphs->end(); ++it) {
    OE_ASSIGN_OR_RETURN(g.graphs[it.key()], ParseGraphRef(it.value(), where + ".graphs." + it.key(), artifact));
  }
  return g;
}

Result<llm::SamplingParams> ParseSampling(const Json* j, const std::string& where) {
  llm::SamplingParams p;
  if (j == nullptr) return p;
  FieldReader r(*j, where);
  p.temperature = float(r.Number("temperature", false, 0.0));
  p.top_k = int32_t(r.Int("top_k", false, 0, 0));
  p.top_p = float(r.Number("top_p", false, 1.0));
  p.min_p = float(r.Number("min_p", false, 0.0));
  p.repetition_penalty = float(r.Number("repetition_penalty", false, 1.0));
  p.seed = uint64_t(r.Int("seed", false, 0, 0));
  OE_RETURN_IF_ERROR(r.Done());
  OE_RETURN_IF_ERROR(llm::Validate(p));
  return p;
}

// The geometry and KV cache of a decoder body, the fields text LLMs and speech decoders share;
// returns the kv section for CheckDecoder.
const Json* ReadDecoder(FieldReader& r, LlmConfig& c) {
  c.hidden_size = r.Int("hidden_size", true, 1);
  c.num_layers = r.Int("num_layers", true, 1);
  c.num_kv_heads = r.Int("num_kv_heads", true, 1);
  c.head_dim = r.Int("head_dim", true, 1);
  c.vocab_size = r.Int("vocab_size", true, 1);
  c.prefill_chunk = r.Int("prefill_chunk", true, 1);
  c.mask_value = float(r.Number("mask_value"));
  return r.Object("kv");
}

Status CheckDecoder(const Json& kv, const std::string& where, LlmConfig& c) {
  if (!(c.mask_value < 0) || c.mask_value < -1e30f) {
    return PlanError(where + ".mask_value: must be a finite negative number (never -inf)");
  }
  FieldReader k(kv, where + ".kv");
  c.kv.mode = k.String("mode");
  const Json* buckets = k.Array("buckets", false);
  c.kv.overflow = k.String("overflow", false, true, "refuse");
  c.kv.window = k.Int("window", false, 1, 0);
  OE_RETURN_IF_ERROR(k.Done());
  OE_ASSIGN_OR_RETURN(c.kv.buckets, IntList(buckets, where + ".kv.buckets", 1));
  if (c.kv.mode == "full") {
    if (c.kv.buckets.empty()) return PlanError(where + ".kv.buckets: full KV needs at least one context bucket");
    if (!std::is_sorted(c.kv.buckets.begin(), c.kv.buckets.end()) ||
        std::adjacent_find(c.kv.buckets.begin(), c.kv.buckets.end()) != c.kv.buckets.end()) {
      return PlanError(where + ".kv.buckets: must be strictly ascending");
    }
    if (c.kv.buckets.front() < c.prefill_chunk) return PlanError(where + ".kv.buckets: smaller than the prefill chunk");
    if (c.kv.overflow != "refuse" && c.kv.overflow != "ring") {
      return PlanError(where + ".kv.overflow: must be refuse or ring, got '" + c.kv.overflow + "'");
    }
  } else if (c.kv.mode == "ring") {
    if (c.kv.window < c.prefill_chunk) return PlanError(where + ".kv.window: ring needs a window >= the prefill chunk");
    if (!c.kv.buckets.empty()) return PlanError(where + ".kv.buckets: a ring has one cache of `window` slots");
  } else {
    return PlanError(where + ".kv.mode: must be full or ring, got '" + c.kv.mode + "'");
  }
  return Status::Ok();
}

Result<LlmConfig> ParseLlm(const Json& j, const std::string& where, const std::string& artifact) {
  FieldReader r(j, where);
  LlmConfig c;
  c.tokenizer = Resolve(artifact, r.String("tokenizer"));
  c.chat_format = r.String("chat_format");
  const Json* stops = r.Array("stop_tokens");
  const Json* kv = ReadDecoder(r, c);
  const Json* sampling = r.Object("sampling", false);
  c.max_new_tokens = r.Int("max_new_tokens", false, 1, 256);
  if (!r.ok()) return r.status();
  OE_RETURN_IF_ERROR(r.Done());
  for (size_t i = 0; i < stops->size(); ++i) {
    if (!(*stops)[i].is_string()) return PlanError(where + ".stop_tokens[" + std::to_string(i) + "]: expected a string");
    c.stop_tokens.push_back((*stops)[i].get<std::string>());
  }
  if (c.chat_format != "chatml" && c.chat_format != "none") {
    return PlanError(where + ".chat_format: must be chatml or none, got '" + c.chat_format + "'");
  }
  OE_RETURN_IF_ERROR(CheckDecoder(*kv, where, c));
  if (!fs::is_regular_file(c.tokenizer)) return Status::Error("file_missing", where + ".tokenizer: " + c.tokenizer);
  OE_ASSIGN_OR_RETURN(c.sampling, ParseSampling(sampling, where + ".sampling"));
  return c;
}

Result<LlmConfig> ParseDecoder(const Json& j, const std::string& where) {
  FieldReader r(j, where);
  LlmConfig c;
  const Json* kv = ReadDecoder(r, c);
  if (!r.ok()) return r.status();
  OE_RETURN_IF_ERROR(r.Done());
  OE_RETURN_IF_ERROR(CheckDecoder(*kv, where, c));
  return c;
}

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

Result<TalkerConfig> ParseTalker(const Json& j, const std::string& where, const std::string& artifact) {
  FieldReader r(j, where);
  TalkerConfig c;
  c.tokenizer = Resolve(artifact, r.String("tokenizer"));
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
  OE_ASSIGN_OR_RETURN(c.decoder, ParseDecoder(*decoder, where + ".decoder"));
  OE_ASSIGN_OR_RETURN(c.predictor, ParseDecoder(*predictor, where + ".predictor"));
  OE_ASSIGN_OR_RETURN(c.sampling, ParseSampling(sampling, where + ".sampling"));
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
  if (!fs::is_regular_file(c.tokenizer)) return Status::Error("file_missing", where + ".tokenizer: " + c.tokenizer);
  return c;
}

Result<VocoderConfig> ParseVocoder(const Json& j, const std::string& where) {
  FieldReader r(j, where);
  VocoderConfig c;
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
  if (!r.ok()) return r.status();
  OE_RETURN_IF_ERROR(r.Done());
  OE_ASSIGN_OR_RETURN(c.windows, IntList(windows, where + ".windows", 1));
  if (c.windows.empty() || !std::is_sorted(c.windows.begin(), c.windows.end()) ||
      std::adjacent_find(c.windows.begin(), c.windows.end()) != c.windows.end()) {
    return PlanError(where + ".windows: at least one, strictly ascending");
  }
  if (c.pcm_dtype != "float32" && c.pcm_dtype != "int16") {
    return PlanError(where + ".pcm_dtype: must be float32 or int16, got '" + c.pcm_dtype + "'");
  }
  if (c.tail_samples >= c.samples_per_frame) return PlanError(where + ".tail_samples: must be less than samples_per_frame");
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
  return c;
}

Status CheckLlmGraphs(const StagePlan& s, const std::string& where) {
  const LlmConfig& c = *s.llm;
  for (const char* role : {"embed", "prefill", "decode", "lm_head"}) {
    if (s.graphs.count(role) == 0) return PlanError(where + ".graphs." + role + ": required for an llm_ar stage");
  }
  for (const char* key : {"chunk", "step"}) {
    if (s.graphs.at("embed").graphs.count(key) == 0) return PlanError(where + ".graphs.embed.graphs." + key + ": missing");
  }
  if (s.graphs.at("lm_head").graphs.count("step") == 0) return PlanError(where + ".graphs.lm_head.graphs.step: missing");
  std::vector<int64_t> caches = c.kv.mode == "full" ? c.kv.buckets : std::vector<int64_t>{c.kv.window};
  for (const char* role : {"prefill", "decode"}) {
    for (int64_t cache : caches) {
      if (s.graphs.at(role).graphs.count(std::to_string(cache)) == 0) {
        return PlanError(where + ".graphs." + role + ".graphs." + std::to_string(cache) +
                         ": no graph for a cache of " + std::to_string(cache) + " slots");
      }
    }
  }
  return Status::Ok();
}

Status RequireGraphs(const StagePlan& s, const std::string& where, const std::string& role,
                     const std::vector<std::string>& keys) {
  auto it = s.graphs.find(role);
  if (it == s.graphs.end()) return PlanError(where + ".graphs." + role + ": required for a " + s.model_stage + " stage");
  for (const auto& key : keys) {
    if (it->second.graphs.count(key) == 0) return PlanError(where + ".graphs." + role + ".graphs." + key + ": missing");
  }
  return Status::Ok();
}

Status CheckTalkerGraphs(const StagePlan& s, const std::string& where) {
  const TalkerConfig& c = *s.talker;
  OE_RETURN_IF_ERROR(RequireGraphs(s, where, "embed", {"chunk", "step"}));
  OE_RETURN_IF_ERROR(RequireGraphs(s, where, "head", {"step"}));
  std::vector<std::string> caches;
  for (int64_t b : c.decoder.kv.mode == "full" ? c.decoder.kv.buckets : std::vector<int64_t>{c.decoder.kv.window}) {
    caches.push_back(std::to_string(b));
  }
  OE_RETURN_IF_ERROR(RequireGraphs(s, where, "prefill", caches));
  OE_RETURN_IF_ERROR(RequireGraphs(s, where, "decode", caches));
  OE_RETURN_IF_ERROR(RequireGraphs(s, where, "predictor_embed", {"step"}));
  std::vector<std::string> slots;
  for (int64_t b : c.predictor.kv.buckets) slots.push_back(std::to_string(b));
  OE_RETURN_IF_ERROR(RequireGraphs(s, where, "predictor_decode", slots));
  return RequireGraphs(s, where, "predictor_head", {"step"});
}

Result<StagePlan> ParseStage(const Json& j, const std::string& where, const std::string& base) {
  FieldReader r(j, where);
  StagePlan s;
  s.stage_id = r.Int("stage_id", true, 0);
  s.model_stage = r.String("model_stage");
  s.execution_type = r.String("execution_type");
  const Json* sources = r.Array("input_sources");
  s.final_output = r.Bool("final_output", false, false);
  s.final_output_type = r.String("final_output_type", false, false);
  s.engine_output_type = r.String("engine_output_type", false, false);
  s.artifact = Resolve(base, r.String("artifact"));
  const Json* llm = r.Object("llm", false);
  const Json* talker = r.Object("talker", false);
  const Json* vocoder = r.Object("vocoder", false);
  const Json* graphs = r.Object("graphs");
  OE_RETURN_IF_ERROR(r.Done());
  OE_ASSIGN_OR_RETURN(s.input_sources, IntList(sources, where + ".input_sources", 0));
  if (s.execution_type != "llm_ar" && s.execution_type != "llm_generation") {
    return PlanError(where + ".execution_type: must be llm_ar or llm_generation, got '" + s.execution_type + "'");
  }
  if (s.final_output && s.final_output_type.empty()) return PlanError(where + ".final_output_type: required for a final output");
  if (!fs::is_directory(s.artifact)) return Status::Error("file_missing", where + ".artifact: " + s.artifact + " is not a directory");
  for (auto it = graphs->begin(); it != graphs->end(); ++it) {
    OE_ASSIGN_OR_RETURN(s.graphs[it.key()], ParseGroup(it.value(), where + ".graphs." + it.key(), s.artifact));
  }
  if (int(llm != nullptr) + int(talker != nullptr) + int(vocoder != nullptr) > 1) {
    return PlanError(where + ": a stage has one model section (llm, talker or vocoder)");
  }
  if (llm != nullptr) {
    OE_ASSIGN_OR_RETURN(s.llm, ParseLlm(*llm, where + ".llm", s.artifact));
    OE_RETURN_IF_ERROR(CheckLlmGraphs(s, where));
  } else if (talker != nullptr) {
    OE_ASSIGN_OR_RETURN(s.talker, ParseTalker(*talker, where + ".talker", s.artifact));
    OE_RETURN_IF_ERROR(CheckTalkerGraphs(s, where));
  } else if (vocoder != nullptr) {
    if (s.execution_type != "llm_generation") return PlanError(where + ".vocoder: a vocoder stage is llm_generation");
    OE_ASSIGN_OR_RETURN(s.vocoder, ParseVocoder(*vocoder, where + ".vocoder"));
    std::vector<std::string> keys;
    for (int64_t w : s.vocoder->windows) keys.push_back(std::to_string(w));
    OE_RETURN_IF_ERROR(RequireGraphs(s, where, "vocoder", keys));
  } else if (s.execution_type == "llm_ar") {
    return PlanError(where + ".llm: required for an llm_ar stage (or a talker section)");
  }
  return s;
}

// The Omni pipeline rules.
Status CheckTopology(const Plan& plan) {
  std::set<int64_t> ids;
  for (const auto& s : plan.stages) {
    if (!ids.insert(s.stage_id).second) return PlanError("stage_id " + std::to_string(s.stage_id) + " is used twice");
  }
  bool entry = false, final_output = false;
  for (const auto& s : plan.stages) {
    for (int64_t src : s.input_sources) {
      if (src == s.stage_id) return PlanError("stage " + std::to_string(s.stage_id) + " lists itself as an input source");
      if (ids.count(src) == 0) {
        return PlanError("stage " + std::to_string(s.stage_id) + " reads from stage " + std::to_string(src) +
                         ", which does not exist");
      }
    }
    entry |= s.input_sources.empty();
    final_output |= s.final_output;
  }
  if (!entry) return PlanError("no entry stage (a stage without input sources)");
  if (!final_output) return PlanError("no final-output stage: every request would hang");
  return Status::Ok();
}

}  // namespace

Result<Plan> ParsePlan(const Json& j, const std::string& base_dir) {
  FieldReader r(j, "plan");
  const int64_t version = r.Int("plan_version");
  Plan plan;
  plan.name = r.String("name", false, true, "");
  const Json* stages = r.Array("stages");
  const Json* limits = r.Object("stream_limits", false);
  const Json* budget = r.Raw("memory_budget_mb");
  if (!r.ok()) return r.status();
  OE_RETURN_IF_ERROR(r.Done());
  if (version != 1) return PlanError("plan.plan_version: must be 1, got " + std::to_string(version));
  if (stages->empty()) return PlanError("plan.stages: at least one stage");
  for (size_t i = 0; i < stages->size(); ++i) {
    OE_ASSIGN_OR_RETURN(StagePlan s, ParseStage((*stages)[i], "plan.stages[" + std::to_string(i) + "]", base_dir));
    plan.stages.push_back(std::move(s));
  }
  if (limits != nullptr) {
    FieldReader l(*limits, "plan.stream_limits");
    plan.stream_limits.max_events = l.Int("max_events", true, 1);
    plan.stream_limits.max_bytes = l.Int("max_bytes", true, 1);
    OE_RETURN_IF_ERROR(l.Done());
  }
  if (budget != nullptr && !budget->is_null()) {
    int64_t mb = 0;
    OE_RETURN_IF_ERROR(CheckInt(*budget, "plan.memory_budget_mb", 1, &mb));
    plan.memory_budget_mb = mb;
  }
  OE_RETURN_IF_ERROR(CheckTopology(plan));
  return plan;
}

Result<Plan> LoadPlan(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Error("file_missing", path + ": cannot open plan");
  std::stringstream text;
  text << in.rdbuf();
  OE_ASSIGN_OR_RETURN(Json j, ParseJson(text.str(), path));
  OE_ASSIGN_OR_RETURN(Plan plan, ParsePlan(j, fs::absolute(path).parent_path().string()));
  plan.path = fs::absolute(path).string();
  return plan;
}

}  // namespace omni_edge
