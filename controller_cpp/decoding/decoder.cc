#include "decoding/decoder.h"

#include <algorithm>
#include <cstring>

namespace omni_edge::decoding {

Result<std::unique_ptr<Decoder>> Decoder::Create(const DecoderConfig& config,
                                                      const std::map<std::string, GraphGroup>& graphs,
                                                      BackendPool& backends, const std::string& name_prefix) {
  std::unique_ptr<Decoder> engine(new Decoder(config, name_prefix));
  OE_RETURN_IF_ERROR(engine->Load(graphs, backends));
  return engine;
}

Status Decoder::Load(const std::map<std::string, GraphGroup>& g, BackendPool& backends) {
  const DecoderConfig& c = config_;
  const int64_t C = c.prefill_chunk, H = c.hidden_size, L = c.num_layers, KV = c.num_kv_heads, D = c.head_dim;
  ids_chunk_ = HostTensor(DType::kInt64, {1, C});
  ids_step_ = HostTensor(DType::kInt64, {1, 1});
  const auto positions = [&](int64_t n) {
    return c.position_rows == 1 ? std::vector<int64_t>{1, n} : std::vector<int64_t>{c.position_rows, 1, n};
  };
  pos_chunk_ = HostTensor(DType::kInt64, positions(C));
  pos_step_ = HostTensor(DType::kInt64, positions(1));
  hidden_chunk_ = HostTensor(DType::kFloat32, {1, C, H});
  hidden_step_ = HostTensor(DType::kFloat32, {1, 1, H});
  out_chunk_ = HostTensor(DType::kFloat32, {1, C, H});
  out_step_ = HostTensor(DType::kFloat32, {1, 1, H});
  head_in_ = HostTensor(DType::kFloat32, {1, 1, H});
  logits_ = HostTensor(DType::kFloat32, {1, 1, c.vocab_size});
  const DType kv = c.kv.dtype;
  seqlens_ = HostTensor(DType::kInt32, {1});
  total_ = HostTensor(DType::kInt32, {1});
  for (int64_t l = 0; l < L && !fused(); ++l) {
    new_k_chunk_.emplace_back(kv, std::vector<int64_t>{1, KV, C, D});
    new_v_chunk_.emplace_back(kv, std::vector<int64_t>{1, KV, C, D});
    new_k_step_.emplace_back(kv, std::vector<int64_t>{1, KV, 1, D});
    new_v_step_.emplace_back(kv, std::vector<int64_t>{1, KV, 1, D});
  }

  for (const char* role : {"decode", "prefill"}) {
    if (g.count(role) == 0 && (role == std::string("decode") || C > 1)) {
      return Status::Error("invalid_plan", std::string("a decoder needs '") + role + "' graphs");
    }
  }
  if (g.count("embed") != 0) {
    OE_ASSIGN_OR_RETURN(embed_chunk_, LoadGraph(backends, g.at("embed"), "chunk", prefix_ + "embed_chunk"));
    OE_ASSIGN_OR_RETURN(embed_step_, LoadGraph(backends, g.at("embed"), "step", prefix_ + "embed_step"));
    OE_RETURN_IF_ERROR(ExpectIo(*embed_chunk_, "embed_chunk", {ids_chunk_.view()}, {hidden_chunk_.view()}));
    OE_RETURN_IF_ERROR(ExpectIo(*embed_step_, "embed_step", {ids_step_.view()}, {hidden_step_.view()}));
    OE_RETURN_IF_ERROR(embed_chunk_->Bind({ids_chunk_.view()}, {hidden_chunk_.view()}));
    OE_RETURN_IF_ERROR(embed_step_->Bind({ids_step_.view()}, {hidden_step_.view()}));
    CountRunBytes(embed_chunk_.get());
    CountRunBytes(embed_step_.get());
  }
  if (g.count("lm_head") != 0) {
    OE_ASSIGN_OR_RETURN(head_, LoadGraph(backends, g.at("lm_head"), "step", prefix_ + "lm_head"));
    OE_RETURN_IF_ERROR(ExpectIo(*head_, "lm_head", {head_in_.view()}, {logits_.view()}));
    OE_RETURN_IF_ERROR(head_->Bind({head_in_.view()}, {logits_.view()}));
    CountRunBytes(head_.get());
  }

  const std::vector<int64_t> caches = c.kv.mode == "full" ? c.kv.buckets : std::vector<int64_t>{c.kv.window};
  for (int64_t cache : caches) {
    Body body;
    body.cache = cache;
    const std::string key = std::to_string(cache);
    if (C > 1) {
      OE_ASSIGN_OR_RETURN(body.prefill, LoadGraph(backends, g.at("prefill"), key, prefix_ + "prefill_s" + key));
    }
    OE_ASSIGN_OR_RETURN(body.decode, LoadGraph(backends, g.at("decode"), key, prefix_ + "decode_s" + key));
    bodies_.push_back(std::move(body));
  }
  if (c.kv.mode == "ring") window_ = c.kv.window;
  // A fused body without a position input rotates q and k itself, at their slots' positions.
  const auto& ins = bodies_.front().decode->inputs();
  rotary_inside_ = fused() && std::none_of(ins.begin(), ins.end(), [](const GraphIo& io) { return io.name == "position_ids"; });
  if (rotary_inside_ && c.position_rows != 1) {
    return Status::Error("invalid_plan", "a body that rotates at slot positions cannot take multimodal RoPE rows");
  }
  if (hybrid()) {
    valid_ = HostTensor(DType::kInt64, {1});
    for (int64_t i = 0; i < c.recurrent.history; ++i) states_.push_back(NewStateSet());
    saved_ = NewStateSet();
    ResetStates();
  }
  return Activate(0, /*keep_contents=*/false);
}

Decoder::StateSet Decoder::NewStateSet() const {
  const RecurrentConfig& r = config_.recurrent;
  StateSet set;
  for (const auto* dims : {&r.conv_state, &r.recurrent_state}) {
    std::vector<int64_t> shape = {1};
    shape.insert(shape.end(), dims->begin(), dims->end());
    for (int64_t l = 0; l < r.layers; ++l) set.tensors.emplace_back(DType::kFloat32, shape);
  }
  return set;
}

void Decoder::ResetStates() {
  for (auto& set : states_) set.position = -1;
  if (states_.empty()) return;
  current_ = 0;
  for (auto& t : states_[0].tensors) std::memset(t.data<char>(), 0, t.nbytes());
  states_[0].position = 0;
  saved_.position = -1;
}

std::string Decoder::recurrent_state() const {
  std::string bytes;
  if (!states_.empty()) {
    for (const auto& t : states_[current_].tensors) bytes.append(t.data<char>(), t.nbytes());
  }
  return bytes;
}

Status Decoder::BindStates(Graph& g, bool chunk) {
  auto& in = chunk ? body_in_chunk_ : body_in_step_;
  auto& out = chunk ? body_out_chunk_ : body_out_step_;
  const StateSet& now = states_[current_];
  const StateSet& next = states_[(current_ + 1) % states_.size()];
  for (size_t i = 0; i < now.tensors.size(); ++i) {
    in[state_in_at_ + i] = now.tensors[i].view();
    out[state_out_at_ + i] = next.tensors[i].view();
  }
  return g.Bind(in, out);
}

void Decoder::AllocateCache(int64_t S, bool keep_contents) {
  const DecoderConfig& c = config_;
  const int64_t KV = c.num_kv_heads, D = c.head_dim, old_cache = cache_;
  const size_t e = DTypeSize(c.kv.dtype);
  const bool copy = keep_contents && !keys_.empty();
  std::vector<HostTensor> keys, values;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    keys.emplace_back(c.kv.dtype, fused() ? std::vector<int64_t>{1, KV, S, D} : std::vector<int64_t>{1, KV, D, S});
    values.emplace_back(c.kv.dtype, std::vector<int64_t>{1, KV, S, D});
    if (!copy) continue;
    // State migration to a larger bucket: the one copy of a growing full cache (in the cache's
    // own type: quantized codes keep their scale in every bucket). Rows [S, D] per head copy
    // whole; transposed keys [D, S] copy a column range per dim.
    char* k_new = keys.back().data<char>();
    char* v_new = values.back().data<char>();
    const char* k_old = keys_[size_t(l)].data<char>();
    const char* v_old = values_[size_t(l)].data<char>();
    for (int64_t h = 0; h < KV; ++h) {
      if (fused()) {
        std::memcpy(k_new + size_t(h * S * D) * e, k_old + size_t(h * old_cache * D) * e, size_t(old_cache * D) * e);
      } else {
        for (int64_t d = 0; d < D; ++d) {
          std::memcpy(k_new + size_t((h * D + d) * S) * e, k_old + size_t((h * D + d) * old_cache) * e, size_t(old_cache) * e);
        }
      }
      std::memcpy(v_new + size_t(h * S * D) * e, v_old + size_t(h * old_cache * D) * e, size_t(old_cache * D) * e);
    }
  }
  keys_ = std::move(keys);
  values_ = std::move(values);
  std::vector<const HostTensor*> state;
  for (const auto* list : {&keys_, &values_}) {
    for (const auto& t : *list) state.push_back(&t);
  }
  kv_pages_ = StateOnHugePages(state);
}

Status Decoder::Activate(size_t index, bool keep_contents) {
  const DecoderConfig& c = config_;
  const int64_t C = c.prefill_chunk, S = bodies_[index].cache;
  AllocateCache(S, keep_contents);
  if (!keep_contents) {
    slot_position_.assign(size_t(S), -1);
  } else {
    slot_position_.resize(size_t(S), -1);
  }
  mask_chunk_ = HostTensor(DType::kFloat32, {1, 1, C, S + C});
  mask_step_ = HostTensor(DType::kFloat32, {1, 1, 1, S + 1});
  active_ = index;
  cache_ = S;

  Body& body = bodies_[index];
  // Masked: (hidden, positions, mask, past...) -> (hidden, new entries...); fused: (hidden,
  // positions, seqlens_k, total, past...) -> (hidden, present...), the present bound to the past.
  std::vector<TensorView> in_chunk = {hidden_chunk_.view()}, in_step = {hidden_step_.view()};
  if (!rotary_inside_) {
    in_chunk.push_back(pos_chunk_.view());
    in_step.push_back(pos_step_.view());
  }
  if (fused()) {
    in_chunk.insert(in_chunk.end(), {seqlens_.view(), total_.view()});
    in_step.insert(in_step.end(), {seqlens_.view(), total_.view()});
  } else {
    in_chunk.push_back(mask_chunk_.view());
    in_step.push_back(mask_step_.view());
  }
  std::vector<TensorView> out_chunk = {out_chunk_.view()}, out_step = {out_step_.view()};
  for (const auto* kv : {&keys_, &values_}) {
    for (const auto& t : *kv) {
      in_chunk.push_back(t.view());
      in_step.push_back(t.view());
      if (fused()) {
        out_chunk.push_back(t.view());
        out_step.push_back(t.view());
      }
    }
  }
  for (const auto* list : {&new_k_chunk_, &new_v_chunk_}) {
    for (const auto& t : *list) out_chunk.push_back(t.view());
  }
  for (const auto* list : {&new_k_step_, &new_v_step_}) {
    for (const auto& t : *list) out_step.push_back(t.view());
  }
  if (hybrid()) {  // bound here to check the names and shapes; every run binds its own pair of sets
    state_in_at_ = in_step.size();
    state_out_at_ = out_step.size();
    const size_t next = (current_ + 1) % states_.size();
    for (size_t i = 0; i < states_[current_].tensors.size(); ++i) {
      in_chunk.push_back(states_[current_].tensors[i].view());
      in_step.push_back(states_[current_].tensors[i].view());
      out_chunk.push_back(states_[next].tensors[i].view());
      out_step.push_back(states_[next].tensors[i].view());
    }
    in_chunk.push_back(valid_.view());
  }
  const std::string tag = "_s" + std::to_string(S);
  if (body.prefill) {  // absent when the prefill chunk is 1: every step is a decode
    OE_RETURN_IF_ERROR(ExpectIo(*body.prefill, "prefill" + tag, in_chunk, out_chunk));
    OE_RETURN_IF_ERROR(body.prefill->Bind(in_chunk, out_chunk));
    CountRunBytes(body.prefill.get());
  }
  OE_RETURN_IF_ERROR(ExpectIo(*body.decode, "decode" + tag, in_step, out_step));
  OE_RETURN_IF_ERROR(body.decode->Bind(in_step, out_step));
  CountRunBytes(body.decode.get());
  step_mask_valid_ = false;
  body_in_chunk_ = std::move(in_chunk);
  body_in_step_ = std::move(in_step);
  body_out_chunk_ = std::move(out_chunk);
  body_out_step_ = std::move(out_step);
  return Status::Ok();
}

Status Decoder::EnsureCapacity(int64_t end_position) {
  if (window_ > 0 || end_position <= cache_) return Status::Ok();
  for (size_t i = active_ + 1; i < bodies_.size(); ++i) {
    if (end_position <= bodies_[i].cache) return Activate(i, /*keep_contents=*/true);
  }
  const int64_t largest = bodies_.back().cache;
  if (config_.kv.overflow == "ring") {
    // Declared in the plan: past the last bucket, slide a window of `largest` positions.
    if (active_ + 1 < bodies_.size()) OE_RETURN_IF_ERROR(Activate(bodies_.size() - 1, /*keep_contents=*/true));
    window_ = largest;
    step_mask_valid_ = false;
    return Status::Ok();
  }
  return Status::Error("context_overflow", "the context needs " + std::to_string(end_position) +
                                               " positions but the largest KV bucket holds " + std::to_string(largest) +
                                               " (plan: kv.overflow = refuse)");
}

void Decoder::FillMask(float* mask, int64_t rows, int64_t n_valid) const {
  const int64_t S = cache_, width = S + rows;
  const float hidden = config_.mask_value;
  for (int64_t t = 0; t < rows; ++t) {
    const int64_t q = position_ + t;
    float* row = mask + t * width;
    for (int64_t j = 0; j < S; ++j) {
      const int64_t p = slot_position_[size_t(j)];
      row[j] = (p >= 0 && (window_ == 0 || p > q - window_)) ? 0.0f : hidden;
    }
    for (int64_t u = 0; u < rows; ++u) {
      const bool visible = u <= t && (window_ == 0 || position_ + u > q - window_);
      row[S + u] = visible ? 0.0f : hidden;
    }
  }
  (void)n_valid;  // padded rows only see themselves and earlier rows; their outputs are dropped
}

void Decoder::CountRunBytes(const Graph* g) {
  const Placement p = g->placement();
  run_bytes_[g] = p.bytes_in_per_run + p.bytes_out_per_run;
}

void Decoder::UpdateStepMask() {
  // A decode step's mask differs from the previous step's in at most two slots: the one the
  // last token was written to (now visible) and, in a ring, the one this token overwrites
  // (its position leaves the window). Anything else (a bucket change, a chunk, a rewind)
  // refills the row.
  float* row = mask_step_.data<float>();
  if (!step_mask_valid_) {
    FillMask(row, 1, 1);
    step_bytes_.controller += int64_t(mask_step_.nbytes());
    step_mask_valid_ = true;
    return;
  }
  if (position_ > 0) {
    row[SlotOf(position_ - 1)] = 0.0f;
    step_bytes_.controller += int64_t(sizeof(float));
  }
  if (window_ > 0 && position_ >= cache_) {
    row[SlotOf(position_)] = config_.mask_value;
    step_bytes_.controller += int64_t(sizeof(float));
  }
}

Status Decoder::RunGraph(Graph& g, const std::string& name, const std::vector<TensorView>& inputs) {
  if (observer_) observer_(name, inputs);
  auto bytes = run_bytes_.find(&g);
  if (bytes != run_bytes_.end()) step_bytes_.backend += bytes->second;
  const auto start = std::chrono::steady_clock::now();
  Status st = g.Run();
  backend_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ++graph_runs_;
  return st;
}

Status Decoder::Step(const TokenId* tokens, int64_t n_valid, bool chunk, const std::vector<Splice>& splices) {
  const int64_t rows = chunk ? config_.prefill_chunk : 1;
  HostTensor& ids = chunk ? ids_chunk_ : ids_step_;
  for (int64_t t = 0; t < rows; ++t) ids.data<int64_t>()[t] = t < n_valid ? tokens[t] : 0;  // padding rows are dropped
  step_bytes_.controller += int64_t(ids.nbytes());
  OE_RETURN_IF_ERROR(RunGraph(chunk ? *embed_chunk_ : *embed_step_, chunk ? "embed:chunk" : "embed:step", {ids.view()}));
  const int64_t H = config_.hidden_size;
  auto it = std::lower_bound(splices.begin(), splices.end(), position_,
                             [](const Splice& s, int64_t p) { return s.position < p; });
  for (; it != splices.end() && it->position < position_ + n_valid; ++it) {
    float* row = (chunk ? hidden_chunk_ : hidden_step_).data<float>() + (it->position - position_) * H;
    std::memcpy(row, it->row, size_t(H) * sizeof(float));
    step_bytes_.controller += H * int64_t(sizeof(float));
  }
  return RunBody(n_valid, chunk);
}

int64_t Decoder::RopePosition(int64_t row, int64_t position) const {
  if (position_table_.empty()) return position;
  const int64_t n = int64_t(position_table_.size()) / config_.position_rows;
  return position < n ? position_table_[size_t(row * n + position)] : table_next_ + (position - n);
}

Status Decoder::SetPositionTable(std::vector<int64_t> rows, int64_t next_position) {
  const int64_t R = config_.position_rows;
  if (rows.size() % size_t(R) != 0) {
    return Status::Error("invalid_argument", "position rows: " + std::to_string(rows.size()) + " values is not " +
                                                 std::to_string(R) + " rows");
  }
  for (int64_t p : rows) {
    if (p < 0 || p > next_position) return Status::Error("invalid_argument", "position rows: a position outside [0, next]");
  }
  if (rotary_inside_) return Status::Error("invalid_argument", "this body rotates at slot positions: no position rows");
  if (position_ == 0) {
    position_table_ = std::move(rows);
    table_next_ = next_position;
    return Status::Ok();
  }
  // A continued conversation: the new rows count from the position the next token would get
  // (every row alike past the table), and the positions before them keep theirs.
  const int64_t base = RopePosition(0, position_), m = int64_t(rows.size()) / R, n = position_ + m;
  std::vector<int64_t> table(size_t(R * n));
  for (int64_t r = 0; r < R; ++r) {
    for (int64_t p = 0; p < position_; ++p) table[size_t(r * n + p)] = RopePosition(r, p);
    for (int64_t k = 0; k < m; ++k) table[size_t(r * n + position_ + k)] = base + rows[size_t(r * m + k)];
  }
  position_table_ = std::move(table);
  table_next_ = base + next_position;
  return Status::Ok();
}

template <typename T>
void Decoder::WriteEntries(const std::vector<HostTensor>& new_k, const std::vector<HostTensor>& new_v, int64_t rows,
                           int64_t t, int64_t slot) {
  const int64_t KV = config_.num_kv_heads, D = config_.head_dim, S = cache_;
  for (size_t l = 0; l < keys_.size(); ++l) {
    for (int64_t h = 0; h < KV; ++h) {
      const T* k = new_k[l].data<T>() + (h * rows + t) * D;
      T* key_column = keys_[l].data<T>() + h * D * S + slot;  // keys are stored [D, S]
      for (int64_t d = 0; d < D; ++d) key_column[d * S] = k[d];
      std::memcpy(values_[l].data<T>() + (h * S + slot) * D, new_v[l].data<T>() + (h * rows + t) * D, size_t(D) * sizeof(T));
    }
  }
}

Status Decoder::RunActiveBody(int64_t n_valid, bool chunk) {
  Body& body = bodies_[active_];
  Graph& g = chunk ? *body.prefill : *body.decode;
  if (hybrid()) {
    valid_.data<int64_t>()[0] = n_valid;
    OE_RETURN_IF_ERROR(BindStates(g, chunk));
    step_bytes_.controller += int64_t(valid_.nbytes());
  }
  OE_RETURN_IF_ERROR(RunGraph(g, (chunk ? "prefill:" : "decode:") + std::to_string(cache_),
                              chunk ? body_in_chunk_ : body_in_step_));
  if (hybrid()) {  // the next set holds the state after these tokens
    current_ = (current_ + 1) % states_.size();
    states_[current_].position = position_ + n_valid;
  }
  return Status::Ok();
}

Status Decoder::RunBody(int64_t n_valid, bool chunk) {
  const int64_t rows = chunk ? config_.prefill_chunk : 1;
  // A fused chunk writes its padding rows too (into slots the next tokens overwrite).
  OE_RETURN_IF_ERROR(EnsureCapacity(position_ + (fused() ? rows : n_valid)));
  HostTensor& pos = chunk ? pos_chunk_ : pos_step_;
  if (!rotary_inside_) {
    for (int64_t r = 0; r < config_.position_rows; ++r) {
      for (int64_t t = 0; t < rows; ++t) pos.data<int64_t>()[r * rows + t] = RopePosition(r, position_ + t);
    }
    step_bytes_.controller += int64_t(pos.nbytes());
  }
  if (fused()) return RunFusedBody(n_valid, chunk);
  if (chunk) {
    FillMask(mask_chunk_.data<float>(), rows, n_valid);
    step_bytes_.controller += int64_t(mask_chunk_.nbytes());
    step_mask_valid_ = false;  // the chunk fills several slots at once
  } else {
    UpdateStepMask();
  }
  OE_RETURN_IF_ERROR(RunActiveBody(n_valid, chunk));

  // Write the new keys/values into their slots in place, in the cache's type.
  const int64_t KV = config_.num_kv_heads, D = config_.head_dim;
  const auto& new_k = chunk ? new_k_chunk_ : new_k_step_;
  const auto& new_v = chunk ? new_v_chunk_ : new_v_step_;
  for (int64_t t = 0; t < n_valid; ++t) {
    const int64_t slot = SlotOf(position_ + t);
    if (config_.kv.dtype == DType::kUint16) {
      WriteEntries<uint16_t>(new_k, new_v, rows, t, slot);
    } else {
      WriteEntries<float>(new_k, new_v, rows, t, slot);
    }
    slot_position_[size_t(slot)] = position_ + t;
  }
  position_ += n_valid;
  const int64_t H = config_.hidden_size;
  std::memcpy(head_in_.data<float>(), (chunk ? out_chunk_ : out_step_).data<float>() + (n_valid - 1) * H,
              size_t(H) * sizeof(float));
  // The new keys and values were read once and written once each; the hidden state copied once.
  step_bytes_.controller += 2 * n_valid * int64_t(keys_.size()) * KV * D * 2 * int64_t(DTypeSize(config_.kv.dtype)) +
                            H * int64_t(sizeof(float));
  return Status::Ok();
}

Status Decoder::RunFusedBody(int64_t n_valid, bool chunk) {
  const int64_t rows = chunk ? config_.prefill_chunk : 1;
  seqlens_.data<int32_t>()[0] = int32_t(position_ + rows - 1);
  total_.data<int32_t>()[0] = int32_t(position_ + rows);
  OE_RETURN_IF_ERROR(RunActiveBody(n_valid, chunk));
  for (int64_t t = 0; t < n_valid; ++t) slot_position_[size_t(position_ + t)] = position_ + t;
  position_ += n_valid;
  const int64_t H = config_.hidden_size;
  std::memcpy(head_in_.data<float>(), (chunk ? out_chunk_ : out_step_).data<float>() + (n_valid - 1) * H,
              size_t(H) * sizeof(float));
  // The kernel wrote the new entries in place; the controller wrote two lengths and copied the hidden state.
  step_bytes_.controller += int64_t(seqlens_.nbytes() + total_.nbytes()) + H * int64_t(sizeof(float));
  return Status::Ok();
}

Result<const float*> Decoder::Feed(const std::vector<TokenId>& tokens) { return Feed(tokens, {}); }

Result<const float*> Decoder::Feed(const std::vector<TokenId>& tokens, const std::vector<Splice>& splices) {
  if (tokens.empty()) return Status::Error("invalid_argument", "no tokens to feed");
  if (!embed_chunk_ || !head_) return Status::Error("invalid_argument", "this decoder has no embedding or head: feed hidden states");
  for (TokenId t : tokens) {
    if (t < 0 || t >= config_.vocab_size) {
      return Status::Error("invalid_argument", "token id " + std::to_string(t) + " is outside the vocabulary");
    }
  }
  const int64_t C = config_.prefill_chunk;
  // A long prompt goes to the bucket that holds it at once: one allocation, instead of a copy into
  // every bucket on the way (measured: 2.4 s of a 16K prompt's prefill on the Qwen3 bench checkpoint).
  OE_RETURN_IF_ERROR(EnsureCapacity(std::min(position_ + int64_t(tokens.size()), bodies_.back().cache)));
  bool chunk = false;
  for (size_t i = 0; i < tokens.size();) {
    const int64_t remaining = int64_t(tokens.size() - i);
    // Position 0 always goes through the prefill graph, even alone: a quantized decode graph's
    // activation ranges were calibrated on steps after a prefill, never on the first token,
    // whose activations (the attention sink's) run 1000x larger. SmolLM2 at w8a16 on the HTP
    // lost its text from a first token fed alone (perplexity x33), and kept it from a prefill.
    chunk = (remaining > 1 || position_ == 0) && C > 1 && ChunkFits();
    const int64_t n = chunk ? std::min(remaining, C) : 1;
    step_bytes_ = {};
    OE_RETURN_IF_ERROR(Step(tokens.data() + i, n, chunk, splices));
    if (chunk) last_prefill_bytes_ = step_bytes_;
    i += size_t(n);
  }
  if (hybrid() && tokens.size() > 1) {  // a prompt: what a rewind past the history re-runs from
    for (size_t i = 0; i < saved_.tensors.size(); ++i) {
      std::memcpy(saved_.tensors[i].data<char>(), states_[current_].tensors[i].data<char>(), saved_.tensors[i].nbytes());
    }
    saved_.position = position_;
  }
  OE_RETURN_IF_ERROR(RunGraph(*head_, "lm_head:step", {head_in_.view()}));
  if (!chunk) last_decode_bytes_ = step_bytes_;  // one token: embed, body and head
  return static_cast<const float*>(logits_.data<float>());
}

Result<const float*> Decoder::FeedHidden(const float* hidden, int64_t n) {
  if (n < 1) return Status::Error("invalid_argument", "no hidden states to feed");
  const int64_t C = config_.prefill_chunk, H = config_.hidden_size;
  for (int64_t i = 0; i < n;) {
    const bool chunk = n - i > 1 && C > 1 && ChunkFits();
    const int64_t rows = chunk ? C : 1, m = std::min(n - i, rows);
    float* in = (chunk ? hidden_chunk_ : hidden_step_).data<float>();
    std::memcpy(in, hidden + i * H, size_t(m * H) * sizeof(float));
    std::memset(in + m * H, 0, size_t((rows - m) * H) * sizeof(float));  // padding rows are dropped
    step_bytes_ = {rows * H * int64_t(sizeof(float)), 0};
    OE_RETURN_IF_ERROR(RunBody(m, chunk));
    (chunk ? last_prefill_bytes_ : last_decode_bytes_) = step_bytes_;
    i += m;
  }
  return static_cast<const float*>(head_in_.data<float>());
}

Status Decoder::Reset() {
  position_ = 0;
  position_table_.clear();
  window_ = config_.kv.mode == "ring" ? config_.kv.window : 0;
  ResetStates();
  if (active_ == 0 && !keys_.empty()) {
    // Already the first bucket: clearing in place is what a fresh one would hold, without
    // re-binding every body (the code predictor resets once per frame).
    for (auto* list : {&keys_, &values_}) {
      for (auto& t : *list) std::memset(t.data<char>(), 0, t.nbytes());
    }
    std::fill(slot_position_.begin(), slot_position_.end(), -1);
    step_mask_valid_ = false;
    return Status::Ok();
  }
  return Activate(0, /*keep_contents=*/false);
}

Status Decoder::Rewind(int64_t position, const std::vector<TokenId>& context) {
  if (position < 0 || position > position_ || int64_t(context.size()) < position) {
    return Status::Error("invalid_argument", "cannot rewind to position " + std::to_string(position));
  }
  if (position == position_) return Status::Ok();
  if (hybrid()) return RewindStates(position, context);
  if (window_ == 0) {
    ForgetFrom(position);
    return Status::Ok();
  }
  // In a ring the dropped positions overwrote slots the window still needs: replay.
  return Refeed(position, context);
}

Status Decoder::Refeed(int64_t position, const std::vector<TokenId>& context) {
  OE_RETURN_IF_ERROR(Reset());
  if (position == 0) return Status::Ok();
  return Feed(std::vector<TokenId>(context.begin(), context.begin() + position)).status();
}

void Decoder::ForgetFrom(int64_t position) {
  for (auto& p : slot_position_) {
    if (p >= position) p = -1;  // slot == position: the earlier slots are untouched
  }
  position_ = position;
  step_mask_valid_ = false;
}

Status Decoder::RewindStates(int64_t position, const std::vector<TokenId>& context) {
  // The recurrent state cannot be rewound by position: find the set that had seen exactly
  // `position` tokens, or rebuild it.
  for (size_t i = 0; i < states_.size(); ++i) {
    if (states_[i].position != position) continue;
    current_ = i;
    for (auto& set : states_) {
      if (set.position > position) set.position = -1;
    }
    ForgetFrom(position);
    last_rewind_ = "history";
    return Status::Ok();
  }
  if (saved_.position > 0 && saved_.position <= position && embed_step_) {
    StateSet& now = states_[current_];
    for (size_t i = 0; i < now.tensors.size(); ++i) {
      std::memcpy(now.tensors[i].data<char>(), saved_.tensors[i].data<char>(), now.tensors[i].nbytes());
    }
    for (auto& set : states_) set.position = -1;
    now.position = saved_.position;
    ForgetFrom(saved_.position);
    for (int64_t t = saved_.position; t < position; ++t) {
      step_bytes_ = {};
      OE_RETURN_IF_ERROR(Step(context.data() + t, 1, /*chunk=*/false, {}));
    }
    last_rewind_ = "replay " + std::to_string(position - saved_.position);
    return Status::Ok();
  }
  if (!embed_chunk_ && position > 0) {
    return Status::Error("invalid_argument", "cannot rewind a hybrid fed hidden states past its state history");
  }
  last_rewind_ = "refeed";
  return Refeed(position, context);
}

std::vector<Placement> Decoder::placements() const {
  std::vector<Placement> out;
  for (const auto* g : {embed_chunk_.get(), embed_step_.get()}) {
    if (g != nullptr) out.push_back(g->placement());
  }
  for (const auto& b : bodies_) {
    if (b.prefill) out.push_back(b.prefill->placement());
    out.push_back(b.decode->placement());
  }
  if (head_) out.push_back(head_->placement());
  return out;
}

}  // namespace omni_edge::decoding
