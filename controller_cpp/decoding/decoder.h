// The text model as graphs: embedding -> body (prefill AR-N or decode AR-1, one graph per
// KV cache size) -> LM head. The engine owns the resident KV cache: new keys/values come out
// of the body for the new tokens only and are written into their slots in place (position p
// goes to slot p, or p mod W in a ring), an additive mask hides empty and out-of-window slots,
// and a full cache moves to the next context bucket (one copy) when it grows. Past the last
// bucket it refuses or rings, as the plan declares. With fused attention (kv.attention) the body
// takes the valid length instead of a mask and writes its new entries into the bound cache itself.
// A hybrid (plan: recurrent) also carries each linear-attention layer's conv and recurrent state:
// fixed in size, read and returned by every body run, kept for a few steps back (rewinds of
// withheld tokens) and saved after each prompt (rewinds further back re-run from there).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "decoding/decoder_config.h"
#include "runtime/backend_pool.h"
#include "runtime/graph.h"
#include "runtime/plan.h"
#include "runtime/tensor.h"
#include "text/tokenizer.h"

namespace omni_edge::decoding {

using text::TokenId;

class Decoder {
 public:
  // A decoder from its graph roles: "decode" (and "prefill" when the prefill chunk is > 1) per
  // cache size; "embed" and "lm_head" are optional, without them only FeedHidden runs (the
  // speech decoders bring their own embeddings and heads).
  static Result<std::unique_ptr<Decoder>> Create(const DecoderConfig& config,
                                                 const std::map<std::string, GraphGroup>& graphs,
                                                 BackendPool& backends, const std::string& name_prefix = "");

  // Runs `tokens` at positions [position(), position() + n) and returns the logits of the last
  // one (vocab_size floats, valid until the next call).
  Result<const float*> Feed(const std::vector<TokenId>& tokens);
  // A multimodal prompt: each splice's row (hidden_size floats, e.g. an encoder's output for one
  // placeholder) replaces the embedding of the token at its position. Sorted by position.
  struct Splice {
    int64_t position;
    const float* row;
  };
  Result<const float*> Feed(const std::vector<TokenId>& tokens, const std::vector<Splice>& splices);
  // Multimodal RoPE: the position rows of positions [0, n) (position_rows x n values, row-major)
  // and the position that follows them; later positions continue from there, equal in every row.
  // Set before the first feed, or, in a continued conversation, for the n positions that follow
  // the resident ones, counted from the position the next token would have had. Reset forgets it.
  Status SetPositionTable(std::vector<int64_t> rows, int64_t next_position);
  // Runs `n` input embeddings ([n, hidden_size] floats) at positions [position(), position() + n)
  // through the body and returns the output hidden state of the last one (hidden_size floats,
  // valid until the next call).
  Result<const float*> FeedHidden(const float* hidden, int64_t n);
  // Forget every position; the cache shrinks back to the first bucket.
  Status Reset();
  // Forget the positions from `position` on. `context` holds the tokens of every position
  // (a ring whose slots were overwritten is rebuilt by replaying them). A hybrid's recurrent
  // state returns to the set it had at `position`: from its history when still there (no copy),
  // else from the state saved after the last prompt by re-running the tokens since through the
  // decode graph (the graph that first ran them: the same arithmetic), else by replaying all.
  Status Rewind(int64_t position, const std::vector<TokenId>& context);
  // How the last Rewind restored a hybrid's state: "history", "replay N" (decode steps from the
  // saved prompt state) or "refeed" (from position 0); empty before any.
  const std::string& last_rewind() const { return last_rewind_; }
  // A hybrid's current recurrent state as bytes (float32): every layer's conv state, then every
  // layer's recurrent state; empty without one.
  std::string recurrent_state() const;

  // Sees the inputs of every graph just before it runs, named "<role>:<key>" as in the plan
  // ("embed:chunk", "prefill:512", "decode:512", "lm_head:step"): calibration for quantization.
  using Observer = std::function<void(const std::string& graph, const std::vector<TensorView>& inputs)>;
  void set_observer(Observer observer) { observer_ = std::move(observer); }

  // The body's output (before the final norm) at the newest position: what produced the last
  // logits. hidden_size floats, valid until the next call.
  const float* last_hidden() const { return head_in_.data<float>(); }
  int64_t position() const { return position_; }
  int64_t cache_slots() const { return cache_; }
  bool ringing() const { return window_ > 0; }
  const DecoderConfig& config() const { return config_; }
  std::vector<Placement> placements() const;
  // Wall time spent inside graph runs, and how many runs.
  double backend_seconds() const { return backend_seconds_; }
  int64_t graph_runs() const { return graph_runs_; }

  // Bytes one step moved: what the controller wrote into and read out of the bound buffers
  // (token ids, positions, mask changes, the new keys/values, the hidden state), and what the
  // backends copied between those buffers and their own memory (Placement::bytes_*_per_run).
  struct StepBytes {
    int64_t controller = 0, backend = 0;
  };
  // How much of the resident KV cache is on huge pages (every decode step reads all of it that is valid).
  const platform::HugePages& kv_pages() const { return kv_pages_; }
  StepBytes last_decode_bytes() const { return last_decode_bytes_; }    // one token: embed, body, head
  StepBytes last_prefill_bytes() const { return last_prefill_bytes_; }  // one prefill chunk: embed, body

 private:
  struct Body {
    int64_t cache = 0;
    std::unique_ptr<Graph> prefill, decode;
  };

  Decoder(DecoderConfig config, std::string prefix)
      : config_(std::move(config)), prefix_(std::move(prefix)), fused_(config_.kv.attention == "fused") {}
  Status Load(const std::map<std::string, GraphGroup>& graphs, BackendPool& backends);
  Status RunBody(int64_t n_valid, bool chunk);
  Status RunActiveBody(int64_t n_valid, bool chunk);  // the active bucket's prefill or decode graph
  Status RunFusedBody(int64_t n_valid, bool chunk);
  Status Activate(size_t body_index, bool keep_contents);
  void AllocateCache(int64_t slots, bool keep_contents);
  Status EnsureCapacity(int64_t end_position);
  Status Step(const TokenId* tokens, int64_t n_valid, bool chunk, const std::vector<Splice>& splices);
  int64_t RopePosition(int64_t row, int64_t position) const;
  int64_t SlotOf(int64_t position) const { return window_ > 0 ? position % cache_ : position; }
  bool fused() const { return fused_; }
  // Whether the next prefill chunk fits: a fused chunk writes all its rows, padding included, so
  // they must fit in the largest bucket.
  bool ChunkFits() const { return !fused_ || position_ + config_.prefill_chunk <= bodies_.back().cache; }
  void FillMask(float* mask, int64_t rows, int64_t n_valid) const;
  Status RunGraph(Graph& g, const std::string& name, const std::vector<TensorView>& inputs);
  // A hybrid's recurrent state sets: the body reads states_[current_] and writes the next one.
  struct StateSet {
    std::vector<HostTensor> tensors;  // conv_0..conv_{R-1}, recurrent_0..recurrent_{R-1}; float32
    int64_t position = -1;            // how many positions it has seen; -1: not a state of this context
  };
  bool hybrid() const { return config_.recurrent.layers > 0; }
  StateSet NewStateSet() const;
  void ResetStates();
  Status BindStates(Graph& g, bool chunk);  // the current set in, the next out; then the run advances
  Status RewindStates(int64_t position, const std::vector<TokenId>& context);
  Status Refeed(int64_t position, const std::vector<TokenId>& context);  // reset, then feed context[0, position)
  void ForgetFrom(int64_t position);  // the KV side of a rewind: slots at or past `position` empty
  void UpdateStepMask();
  template <typename T>
  void WriteEntries(const std::vector<HostTensor>& new_k, const std::vector<HostTensor>& new_v, int64_t rows, int64_t t,
                    int64_t slot);
  void CountRunBytes(const Graph* g);

  DecoderConfig config_;
  std::string prefix_;  // of graph names in reports ("talker_", "predictor_")
  bool fused_ = false;          // the plan's kv.attention is "fused"
  bool rotary_inside_ = false;  // a fused body that rotates q and k itself (no position input)
  std::unique_ptr<Graph> embed_chunk_, embed_step_, head_;
  std::vector<Body> bodies_;
  size_t active_ = 0;
  int64_t cache_ = 0;     // slots of the active cache
  int64_t window_ = 0;    // > 0: ring of `cache_` slots, attention window of `cache_` positions
  int64_t position_ = 0;  // tokens in the cache
  std::vector<int64_t> position_table_;  // SetPositionTable's rows (empty: RoPE positions are slot positions)
  int64_t table_next_ = 0;
  std::vector<int64_t> slot_position_;  // position held by each slot, -1 if empty

  HostTensor ids_chunk_, ids_step_, pos_chunk_, pos_step_;
  HostTensor hidden_chunk_, hidden_step_, out_chunk_, out_step_;
  HostTensor mask_chunk_, mask_step_;
  HostTensor seqlens_, total_;      // fused attention: the valid length - 1 and the valid length, int32 [1]
  // [1, kv_heads, head_dim, cache] per layer (transposed: a plain bmm reads it); fused attention:
  // [1, kv_heads, cache, head_dim], the kernel's layout
  std::vector<HostTensor> keys_;
  std::vector<HostTensor> values_;
  platform::HugePages kv_pages_;  // how much of the cache is on huge pages, and why not, where not  // [1, kv_heads, cache, head_dim] per layer; both in config_.kv.dtype
  std::vector<HostTensor> new_k_chunk_, new_v_chunk_, new_k_step_, new_v_step_;
  HostTensor head_in_, logits_;
  std::vector<TensorView> body_in_chunk_, body_in_step_;  // the active bucket's bound body inputs
  std::vector<TensorView> body_out_chunk_, body_out_step_;  // and outputs
  std::vector<StateSet> states_;  // config_.recurrent.history sets, rotating
  size_t current_ = 0;
  StateSet saved_;                // after the last prompt
  HostTensor valid_;              // int64 [1]: a prefill chunk's valid rows (its padding leaves the state alone)
  size_t state_in_at_ = 0, state_out_at_ = 0;  // where the states sit among the bound inputs / outputs
  std::string last_rewind_;
  bool step_mask_valid_ = false;  // mask_step_ matches the slots: a decode step changes only its own entries
  std::map<const Graph*, int64_t> run_bytes_;  // per bound graph: bytes its backend copies per run
  StepBytes step_bytes_, last_decode_bytes_, last_prefill_bytes_;
  Observer observer_;
  double backend_seconds_ = 0;
  int64_t graph_runs_ = 0;
};

}  // namespace omni_edge::decoding
