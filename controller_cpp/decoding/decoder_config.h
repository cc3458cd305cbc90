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

struct DecoderConfig {
  int64_t hidden_size = 0, num_layers = 0, num_kv_heads = 0, head_dim = 0, vocab_size = 0;
  int64_t prefill_chunk = 0;
  // Rows of the body's position input: 1 ([1, N]), or 3 for multimodal RoPE ([3, 1, N]: temporal,
  // height, width; equal for text).
  int64_t position_rows = 1;
  float mask_value = -10000.0f;
  KvConfig kv;
};

// Reads the decoder's fields from `r` (hidden_size ... mask_value) and returns its "kv" section
// (nullptr after an error), for ParseKv once the caller has read its own fields.
const Json* ReadDecoderFields(FieldReader& r, DecoderConfig& c);
// Parses and checks the kv section and the mask value (finite, negative).
Status ParseKv(const Json& kv, const std::string& where, DecoderConfig& c);
// A whole decoder section (a talker's "decoder" or "predictor").
Result<DecoderConfig> ParseDecoder(const Json& j, const std::string& where);

// The cache sizes the decoder has graphs for: the buckets of a full cache, the window of a ring.
std::vector<int64_t> CacheSizes(const DecoderConfig& c);
// The resident KV cache in host tensors of the cache's type; a full cache that migrates holds its last two
// buckets at once.
int64_t StateBytes(const DecoderConfig& c);
// Activations and logits of a prefill chunk.
int64_t WorkspaceBytes(const DecoderConfig& c);

}  // namespace omni_edge::decoding
