// The geometry and KV cache of a decoder body (a text LLM, a talker, a code predictor) as a
// plan declares it, read by the families whose sections hold one; and what it costs in memory.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/json_fields.h"
#include "base/status.h"
#include "runtime/tensor.h"

namespace omni_edge::decoding {

struct KvConfig {
  std::string mode;              // full | ring
  std::vector<int64_t> buckets;  // full: context buckets, ascending
  std::string overflow;          // full: refuse | ring (slide over the largest bucket)
  int64_t window = 0;            // ring: slots = the model's sliding window
  // The cache's element type at the graph boundary: float32, or the uint16 codes of a quantized
  // graph (one scale per layer shared by every graph, so entries are copied as they are).
  DType dtype = DType::kFloat32;
  // How the body graphs attend: "masked" (an additive mask over every slot of the bucket, new
  // keys/values out, written into their slots by the engine) or "fused" (ONNX Runtime's
  // GroupQueryAttention over the valid slots only, the cache bound as both its past input and its
  // present output so the kernel writes new entries in place; keys [1, kv, S, D] like values).
  std::string attention = "masked";
};

// A hybrid's linear-attention layers (Qwen3.5's Gated DeltaNet): each carries a conv state and a
// recurrent state of fixed size, whatever the context; the body reads them as inputs and returns
// the next ones. `history` state sets rotate (each run reads one and writes the next), so the
// last history-1 steps can be returned to without a copy; further back, the decoder restores the
// state it saved after the last prompt and re-runs the tokens since, one decode step each.
struct RecurrentConfig {
  int64_t layers = 0;                    // 0: no recurrent state
  std::vector<int64_t> conv_state;       // per layer, without the batch: [conv_dim, kernel - 1]
  std::vector<int64_t> recurrent_state;  // per layer, without the batch: [v_heads, k_dim, v_dim]
  int64_t history = 4;
  int64_t set_bytes() const;             // one layer set: every layer's two states, float32
};

struct DecoderConfig {
  // num_layers: the layers with a KV cache (a hybrid's attention layers; recurrent.layers are the others).
  int64_t hidden_size = 0, num_layers = 0, num_kv_heads = 0, head_dim = 0, vocab_size = 0;
  int64_t prefill_chunk = 0;
  // Rows of the body's position input: 1 ([1, N]), or 3 for multimodal RoPE ([3, 1, N]: temporal,
  // height, width; equal for text).
  int64_t position_rows = 1;
  float mask_value = -10000.0f;
  KvConfig kv;
  RecurrentConfig recurrent;
};

// The sections of a decoder besides its own fields: "kv" (required) and "recurrent" (a hybrid's).
struct DecoderSections {
  const Json* kv = nullptr;
  const Json* recurrent = nullptr;
};

// Reads the decoder's fields from `r` (hidden_size ... mask_value) and returns its sections (kv
// nullptr after an error), for ParseSections once the caller has read its own fields.
DecoderSections ReadDecoderFields(FieldReader& r, DecoderConfig& c);
// Parses and checks the kv section, the mask value (finite, negative) and a recurrent section.
Status ParseSections(const DecoderSections& sections, const std::string& where, DecoderConfig& c);
// The kv section and the mask value alone.
Status ParseKv(const Json& kv, const std::string& where, DecoderConfig& c);
// A whole decoder section (a talker's "decoder" or "predictor").
Result<DecoderConfig> ParseDecoder(const Json& j, const std::string& where);

// The cache sizes the decoder has graphs for: the buckets of a full cache, the window of a ring.
std::vector<int64_t> CacheSizes(const DecoderConfig& c);
// The resident KV cache in host tensors of the cache's type (a full cache that migrates holds its last two
// buckets at once), and a hybrid's recurrent state sets (its history and the saved prompt state).
int64_t StateBytes(const DecoderConfig& c);
// Activations and logits of a prefill chunk.
int64_t WorkspaceBytes(const DecoderConfig& c);

}  // namespace omni_edge::decoding
