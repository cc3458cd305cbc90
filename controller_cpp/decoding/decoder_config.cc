#include "decoding/decoder_config.h"

#include <algorithm>

namespace omni_edge::decoding {
namespace {

Status PlanError(const std::string& what) { return Status::Error("invalid_plan", what); }

}  // namespace

DecoderSections ReadDecoderFields(FieldReader& r, DecoderConfig& c) {
  c.hidden_size = r.Int("hidden_size", true, 1);
  c.num_layers = r.Int("num_layers", true, 1);
  c.num_kv_heads = r.Int("num_kv_heads", true, 1);
  c.head_dim = r.Int("head_dim", true, 1);
  c.vocab_size = r.Int("vocab_size", true, 1);
  c.prefill_chunk = r.Int("prefill_chunk", true, 1);
  c.position_rows = r.Int("position_rows", false, 1, 1);
  c.mask_value = float(r.Number("mask_value"));
  DecoderSections s;
  s.kv = r.Object("kv");
  s.recurrent = r.Object("recurrent", false);
  return s;
}

int64_t RecurrentConfig::set_bytes() const {
  int64_t conv = 1, state = 1;
  for (int64_t d : conv_state) conv *= d;
  for (int64_t d : recurrent_state) state *= d;
  return layers * (conv + state) * int64_t(sizeof(float));
}

namespace {

Status ReadShape(const Json* dims, const std::string& where, size_t rank, std::vector<int64_t>* out) {
  if (dims == nullptr) return Status::Ok();  // the reader reported it
  if (dims->size() != rank) return PlanError(where + ": expected " + std::to_string(rank) + " dimensions");
  out->clear();
  for (size_t i = 0; i < rank; ++i) {
    int64_t v = 0;
    OE_RETURN_IF_ERROR(CheckInt((*dims)[i], where + "[" + std::to_string(i) + "]", 1, &v));
    if (v > (int64_t(1) << 20)) return PlanError(where + "[" + std::to_string(i) + "]: too large");
    out->push_back(v);
  }
  return Status::Ok();
}

Status ParseRecurrent(const Json& j, const std::string& where, DecoderConfig& c) {
  FieldReader r(j, where + ".recurrent");
  RecurrentConfig& rc = c.recurrent;
  rc.layers = r.Int("layers", true, 1);
  const Json* conv = r.Array("conv_state");
  const Json* state = r.Array("recurrent_state");
  rc.history = r.Int("history", false, 2, 4);
  if (!r.ok()) return r.status();
  OE_RETURN_IF_ERROR(r.Done());
  if (rc.history > 64) return PlanError(where + ".recurrent.history: at most 64 state sets");
  OE_RETURN_IF_ERROR(ReadShape(conv, where + ".recurrent.conv_state", 2, &rc.conv_state));
  OE_RETURN_IF_ERROR(ReadShape(state, where + ".recurrent.recurrent_state", 3, &rc.recurrent_state));
  // The attention layers of a hybrid attend to every position: a window would drop positions the
  // model sees (not the model's arithmetic), so only a full cache that refuses to overflow is exact.
  if (c.kv.mode != "full" || c.kv.overflow != "refuse") {
    return PlanError(where + ".recurrent: a hybrid's attention layers attend to every position; its KV must be "
                             "full with overflow refuse (a ring or sliding window would not be the model)");
  }
  return Status::Ok();
}

}  // namespace

Status ParseSections(const DecoderSections& sections, const std::string& where, DecoderConfig& c) {
  OE_RETURN_IF_ERROR(ParseKv(*sections.kv, where, c));
  c.recurrent = RecurrentConfig();
  if (sections.recurrent != nullptr) OE_RETURN_IF_ERROR(ParseRecurrent(*sections.recurrent, where, c));
  return Status::Ok();
}

Status ParseKv(const Json& kv, const std::string& where, DecoderConfig& c) {
  if (!(c.mask_value < 0) || c.mask_value < -1e30f) {
    return PlanError(where + ".mask_value: must be a finite negative number (never -inf)");
  }
  if (c.position_rows != 1 && c.position_rows != 3) {
    return PlanError(where + ".position_rows: must be 1 or 3 (multimodal RoPE), got " + std::to_string(c.position_rows));
  }
  FieldReader k(kv, where + ".kv");
  c.kv.mode = k.String("mode");
  const Json* buckets = k.Array("buckets", false);
  c.kv.overflow = k.String("overflow", false, true, "refuse");
  c.kv.window = k.Int("window", false, 1, 0);
  const std::string dtype = k.String("dtype", false, true, "float32");
  c.kv.attention = k.String("attention", false, true, "masked");
  OE_RETURN_IF_ERROR(k.Done());
  if (dtype == "float32") {
    c.kv.dtype = DType::kFloat32;
  } else if (dtype == "uint16") {
    c.kv.dtype = DType::kUint16;
  } else {
    return PlanError(where + ".kv.dtype: must be float32 or uint16, got '" + dtype + "'");
  }
  c.kv.buckets.clear();
  for (size_t i = 0; buckets != nullptr && i < buckets->size(); ++i) {
    int64_t v = 0;
    OE_RETURN_IF_ERROR(CheckInt((*buckets)[i], where + ".kv.buckets[" + std::to_string(i) + "]", 1, &v));
    c.kv.buckets.push_back(v);
  }
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
  if (c.kv.attention == "fused") {
    // The fused kernel is causal by slot: slots must hold positions in order, which a ring's do not.
    if (c.kv.mode != "full" || c.kv.overflow != "refuse") {
      return PlanError(where + ".kv.attention: fused attention needs a full cache that refuses to overflow (a ring's "
                               "slots are not in position order)");
    }
    if (c.kv.dtype != DType::kFloat32) return PlanError(where + ".kv.attention: fused attention reads a float32 cache");
  } else if (c.kv.attention != "masked") {
    return PlanError(where + ".kv.attention: must be masked or fused, got '" + c.kv.attention + "'");
  }
  return Status::Ok();
}

Result<DecoderConfig> ParseDecoder(const Json& j, const std::string& where) {
  FieldReader r(j, where);
  DecoderConfig c;
  const DecoderSections sections = ReadDecoderFields(r, c);
  if (!r.ok()) return r.status();
  OE_RETURN_IF_ERROR(r.Done());
  OE_RETURN_IF_ERROR(ParseSections(sections, where, c));
  return c;
}

std::vector<int64_t> CacheSizes(const DecoderConfig& c) {
  return c.kv.mode == "full" ? c.kv.buckets : std::vector<int64_t>{c.kv.window};
}

int64_t StateBytes(const DecoderConfig& c) {
  const int64_t per_slot = 2 * c.num_layers * c.num_kv_heads * c.head_dim * int64_t(DTypeSize(c.kv.dtype));
  int64_t slots = c.kv.window;
  if (c.kv.mode == "full" && !c.kv.buckets.empty()) {
    const size_t n = c.kv.buckets.size();
    slots = c.kv.buckets[n - 1] + (n > 1 ? c.kv.buckets[n - 2] : 0);
  }
  return per_slot * slots + (c.recurrent.layers > 0 ? (c.recurrent.history + 1) * c.recurrent.set_bytes() : 0);
}

int64_t WorkspaceBytes(const DecoderConfig& c) {
  return std::max<int64_t>(c.prefill_chunk, 1) * (c.vocab_size + 8 * c.hidden_size) * 4;
}

}  // namespace omni_edge::decoding
