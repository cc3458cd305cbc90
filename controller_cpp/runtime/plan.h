// The execution plan: stages in the Omni pipeline vocabulary (stage_id, model_stage,
// execution_type, input_sources, final_output, ...), each with its artifact directory and,
// per graph role, the backend and device it runs on. Parsing is strict (unknown fields and
// wrong types are refused, naming the field) and the Omni topology rules are enforced: unique
// stage ids, sources that exist and are not the stage itself, at least one entry stage and at
// least one final-output stage.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/json_fields.h"
#include "base/status.h"
#include "contract/event_stream.h"
#include "models/llm/sampler.h"

namespace omni_edge {

struct GraphRef {
  std::string file;    // absolute path
  std::string method;  // for multi-method programs
};

// How one graph role (embed, prefill, decode, lm_head, ...) of a stage runs.
struct GraphGroup {
  std::string backend;
  std::string device;
  std::map<std::string, std::string> options;
  std::map<std::string, GraphRef> graphs;  // key: role variant ("chunk", "step", or a cache size)
};

struct KvConfig {
  std::string mode;              // full | ring
  std::vector<int64_t> buckets;  // full: context buckets, ascending
  std::string overflow;          // full: refuse | ring (slide over the largest bucket)
  int64_t window = 0;            // ring: slots = the model's sliding window
};

struct LlmConfig {
  std::string tokenizer;  // absolute path of tokenizer.json
  std::string chat_format;
  std::vector<std::string> stop_tokens;
  int64_t hidden_size = 0, num_layers = 0, num_kv_heads = 0, head_dim = 0, vocab_size = 0;
  int64_t prefill_chunk = 0;
  float mask_value = -10000.0f;
  KvConfig kv;
  llm::SamplingParams sampling;
  int64_t max_new_tokens = 256;
};

// A speech talker stage: a decoder emitting codebook 0 of each frame from text, and the code
// predictor filling codebooks 1..code_groups-1 of the frame (CONTRACT: its output is codes).
// One row of the talker's prompt: a text token beside a codebook-0 id (kTextOnly: none).
struct PromptRow {
  static constexpr int64_t kTextOnly = -1;
  int64_t text_id = 0, codec_id = kTextOnly;
};

// The talker's prefix around the text: `head` rows, each text token beside `text_codec`, then
// `tail` rows; every frame after reads `frame_text` (a Qwen3-TTS release's role, think-tag,
// language and speaker rows are head rows). With `stream_text` only the first text token is in
// the prefix; frame t's input reads text token t + 1, then `text_end` (if >= 0), then frame_text.
struct TalkerPrompt {
  std::vector<PromptRow> head, tail;
  int64_t text_codec = 0, frame_text = 0;
  bool stream_text = false;
  int64_t text_end = -1;
};

struct TalkerConfig {
  std::string tokenizer;  // absolute path of tokenizer.json (the text side)
  int64_t text_pad_id = 0;
  int64_t code_groups = 0, codebook_size = 0;
  int64_t codec_pad = 0, codec_bos = 0, codec_eos = 0;  // special ids of codebook 0
  int64_t max_frames = 1500;
  int64_t min_frames = 0;  // frames before end of speech may be said
  TalkerPrompt prompt;     // default: no head, text beside the codec pad, [text pad + codec bos]
  llm::SamplingParams sampling;
  LlmConfig decoder;    // the talker body (only geometry and KV are used)
  LlmConfig predictor;  // the code predictor body: one slot per code group (its width may differ)
};

// A streaming vocoder stage: each chunk of `chunk` frames (the first `first_chunk`) is decoded
// after up to `left_context` frames of context, in the smallest window graph it fits. The
// largest window is left_context + max(first_chunk, chunk) + 1; smaller ones serve the first
// chunks (a one-frame first chunk in a two-frame window is the low first-PCM latency).
struct VocoderConfig {
  int64_t code_groups = 0, samples_per_frame = 0, sample_rate = 0, tail_samples = 0;
  int64_t first_chunk = 1, chunk = 25, left_context = 72;
  std::vector<int64_t> windows = {2, 98};  // ascending, frames per window graph
  std::string pcm_dtype = "float32";  // float32 | int16: what pcm events carry
};

struct StagePlan {
  int64_t stage_id = 0;
  std::string model_stage;
  std::string execution_type;  // llm_ar | llm_generation
  std::vector<int64_t> input_sources;
  bool final_output = false;
  std::string final_output_type;
  std::string engine_output_type;
  std::string artifact;  // absolute path of the artifact directory
  std::optional<LlmConfig> llm;
  std::optional<TalkerConfig> talker;
  std::optional<VocoderConfig> vocoder;
  std::map<std::string, GraphGroup> graphs;
};

struct Plan {
  std::string path;
  std::string name;
  std::vector<StagePlan> stages;
  contract::StreamLimits stream_limits;
  std::optional<int64_t> memory_budget_mb;
};

Result<Plan> LoadPlan(const std::string& path);
// `base_dir` resolves the relative paths in the plan.
Result<Plan> ParsePlan(const Json& j, const std::string& base_dir);

}  // namespace omni_edge
