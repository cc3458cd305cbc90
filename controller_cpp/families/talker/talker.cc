#include "families/talker/talker.h"

#include <chrono>
#include <cstring>
#include <limits>

namespace omni_edge::talker {
namespace {

// The roles of one decoder in the stage's graph groups, under the names a Decoder expects.
std::map<std::string, GraphGroup> DecoderGraphs(const StagePlan& stage, const std::string& prefix) {
  std::map<std::string, GraphGroup> out;
  for (const char* role : {"prefill", "decode"}) {
    auto it = stage.graphs.find(prefix + role);
    if (it != stage.graphs.end()) out[role] = it->second;
  }
  return out;
}

}  // namespace

Result<std::unique_ptr<Talker>> Talker::Create(const StagePlan& stage, BackendPool& backends) {
  const TalkerConfig* config = stage.config_as<TalkerConfig>();
  if (config == nullptr) return Status::Error("internal", "stage " + std::to_string(stage.stage_id) + " is not a talker stage");
  std::unique_ptr<Talker> t(new Talker(*config));
  OE_RETURN_IF_ERROR(t->Load(stage, backends));
  return t;
}

Status Talker::Load(const StagePlan& stage, BackendPool& backends) {
  const TalkerConfig& c = config_;
  const int64_t C = c.decoder.prefill_chunk, H = c.decoder.hidden_size, Hp = c.predictor.hidden_size, G = c.code_groups;
  OE_ASSIGN_OR_RETURN(talker_, decoding::Decoder::Create(c.decoder, DecoderGraphs(stage, ""), backends, "talker_"));
  OE_ASSIGN_OR_RETURN(predictor_, decoding::Decoder::Create(c.predictor, DecoderGraphs(stage, "predictor_"), backends, "predictor_"));

  text_chunk_ = HostTensor(DType::kInt64, {1, C});
  codes_chunk_ = HostTensor(DType::kInt64, {1, C, G});
  hidden_chunk_ = HostTensor(DType::kFloat32, {1, C, H});
  text_step_ = HostTensor(DType::kInt64, {1, 1});
  codes_step_ = HostTensor(DType::kInt64, {1, 1, G});
  hidden_step_ = HostTensor(DType::kFloat32, {1, 1, H});
  head_in_ = HostTensor(DType::kFloat32, {1, 1, H});
  normed_ = HostTensor(DType::kFloat32, {1, 1, Hp});
  logits_ = HostTensor(DType::kFloat32, {1, 1, c.decoder.vocab_size});
  predictor_id_ = HostTensor(DType::kInt64, {1, 1});
  predictor_in_ = HostTensor(DType::kFloat32, {1, 1, Hp});
  predictor_hidden_ = HostTensor(DType::kFloat32, {1, 1, Hp});
  predictor_logits_ = HostTensor(DType::kFloat32, {1, G - 1, c.codebook_size});

  auto prepare = [&](std::unique_ptr<Graph>& g, const std::string& role, const std::string& key, const std::string& name,
                     const std::vector<TensorView>& in, const std::vector<TensorView>& out) -> Status {
    OE_ASSIGN_OR_RETURN(g, LoadGraph(backends, stage.graphs.at(role), key, name));
    OE_RETURN_IF_ERROR(ExpectIo(*g, name, in, out));
    return g->Bind(in, out);
  };
  OE_RETURN_IF_ERROR(prepare(embed_chunk_, "embed", "chunk", "talker_embed_chunk", {text_chunk_.view(), codes_chunk_.view()},
                             {hidden_chunk_.view()}));
  OE_RETURN_IF_ERROR(prepare(embed_step_, "embed", "step", "talker_embed_step", {text_step_.view(), codes_step_.view()},
                             {hidden_step_.view()}));
  if (stage.graphs.count("embed_hidden") != 0) {
    // Its text input is as wide as the thinker's hidden states: read from the graph, checked
    // against the thinker's hidden size when a state arrives.
    OE_ASSIGN_OR_RETURN(embed_hidden_, LoadGraph(backends, stage.graphs.at("embed_hidden"), "step", "talker_embed_hidden"));
    const auto& in = embed_hidden_->inputs();
    if (in.empty() || in[0].shape.size() != 3 || in[0].shape[2] < 1) {
      return Status::Error("graph_mismatch", "talker_embed_hidden: input 0 must be [1, 1, text_hidden]");
    }
    text_hidden_ = HostTensor(DType::kFloat32, {1, 1, in[0].shape[2]});
    OE_RETURN_IF_ERROR(ExpectIo(*embed_hidden_, "talker_embed_hidden", {text_hidden_.view(), codes_step_.view()},
                                {hidden_step_.view()}));
    OE_RETURN_IF_ERROR(embed_hidden_->Bind({text_hidden_.view(), codes_step_.view()}, {hidden_step_.view()}));
  }
  OE_RETURN_IF_ERROR(prepare(head_, "head", "step", "talker_head", {head_in_.view()}, {normed_.view(), logits_.view()}));
  OE_RETURN_IF_ERROR(prepare(predictor_embed_, "predictor_embed", "step", "predictor_embed", {predictor_id_.view()},
                             {predictor_in_.view()}));
  return prepare(predictor_head_, "predictor_head", "step", "predictor_head", {predictor_hidden_.view()},
                 {predictor_logits_.view()});
}

int64_t Talker::MaxPositions() const {
  const decoding::KvConfig& kv = config_.decoder.kv;
  return kv.mode == "full" && kv.overflow == "refuse" ? kv.buckets.back() : std::numeric_limits<int64_t>::max();
}

Status Talker::Run(Graph& g) {
  const auto start = std::chrono::steady_clock::now();
  Status st = g.Run();
  graph_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return st;
}

Status Talker::Start(const std::vector<int32_t>& text_ids) {
  const TalkerConfig& c = config_;
  const TalkerPrompt& prompt = c.prompt;
  const int64_t C = c.decoder.prefill_chunk, G = c.code_groups;
  for (int32_t id : text_ids) {
    if (id < 0) return Status::Error("invalid_prompt", "text token id " + std::to_string(id) + " is negative");
  }
  OE_RETURN_IF_ERROR(talker_->Reset());
  unfed_.reset();
  said_.clear();
  text_queue_.clear();
  const int64_t head = int64_t(prompt.head.size()), n = PrefixLength(text_ids);
  const int64_t text_end = n - int64_t(prompt.tail.size());  // past the text rows of the prefix
  if (prompt.stream_text) {
    if (text_ids.size() > 1) text_queue_.assign(text_ids.begin() + 1, text_ids.end());
    if (prompt.text_end >= 0) text_queue_.push_back(prompt.text_end);
  }
  auto row = [&](int64_t p) -> PromptRow {
    if (p < head) return prompt.head[size_t(p)];
    if (p < text_end) return {text_ids[size_t(p - head)], prompt.text_codec};
    return prompt.tail[size_t(p - text_end)];
  };
  for (int64_t start = 0; start < n; start += C) {
    const int64_t m = std::min(C, n - start);
    int64_t* text = text_chunk_.data<int64_t>();
    int64_t* codes = codes_chunk_.data<int64_t>();
    for (int64_t t = 0; t < C; ++t) {
      const PromptRow r = start + t < n ? row(start + t) : PromptRow{0, 0};
      text[t] = r.text_id;
      // Absent rows: the embed graph's zero row past each table (V for codebook 0).
      codes[t * G] = r.codec_id == PromptRow::kTextOnly ? c.decoder.vocab_size : r.codec_id;
      for (int64_t g = 1; g < G; ++g) codes[t * G + g] = c.codebook_size;
    }
    OE_RETURN_IF_ERROR(Run(*embed_chunk_));
    OE_ASSIGN_OR_RETURN(last_hidden_, talker_->FeedHidden(hidden_chunk_.data<float>(), m));
  }
  return Status::Ok();
}

Status Talker::StartDual() {
  if (!embed_hidden_) return Status::Error("invalid_plan", "this talker has no embed_hidden graph: it cannot read a thinker");
  OE_RETURN_IF_ERROR(talker_->Reset());
  said_.clear();
  text_queue_.clear();
  // Frame 0's codec input is the BOS (codebook 0 only); its text input comes with Next().
  Frame bos(size_t(config_.code_groups), int32_t(config_.codebook_size));
  bos[0] = int32_t(config_.codec_bos);
  unfed_ = bos;
  last_hidden_ = nullptr;
  return Status::Ok();
}

Result<int32_t> Talker::PredictorStep(decoding::Sampler& sampler, int64_t group) {
  OE_ASSIGN_OR_RETURN(const float* out, predictor_->FeedHidden(predictor_in_.data<float>(), 1));
  std::memcpy(predictor_hidden_.data<float>(), out, predictor_hidden_.nbytes());
  OE_RETURN_IF_ERROR(Run(*predictor_head_));
  const int64_t V = config_.codebook_size;
  return int32_t(sampler.Sample(predictor_logits_.data<float>() + (group - 1) * V, V, {}));
}

Result<std::optional<Frame>> Talker::Next(decoding::Sampler& sampler, const float* text_hidden) {
  const TalkerConfig& c = config_;
  const int64_t G = c.code_groups, H = c.decoder.hidden_size, V = c.decoder.vocab_size;
  if (last_hidden_ == nullptr && !unfed_) return Status::Error("internal", "Next() before Start()");
  if (text_hidden != nullptr && !embed_hidden_) return Status::Error("internal", "a text hidden state for a talker without embed_hidden");
  if (unfed_) {
    for (int64_t g = 0; g < G; ++g) codes_step_.data<int64_t>()[g] = (*unfed_)[size_t(g)];
    if (text_hidden != nullptr) {
      std::memcpy(text_hidden_.data<float>(), text_hidden, text_hidden_.nbytes());
      OE_RETURN_IF_ERROR(Run(*embed_hidden_));
    } else {
      text_step_.data<int64_t>()[0] = text_queue_.empty() ? c.prompt.frame_text : text_queue_.front();
      if (!text_queue_.empty()) text_queue_.pop_front();
      OE_RETURN_IF_ERROR(Run(*embed_step_));
    }
    OE_ASSIGN_OR_RETURN(last_hidden_, talker_->FeedHidden(hidden_step_.data<float>(), 1));
    unfed_.reset();
  }
  std::memcpy(head_in_.data<float>(), last_hidden_, size_t(H) * sizeof(float));
  OE_RETURN_IF_ERROR(Run(*head_));
  // Codebook 0 is a code or the end of speech (not before min_frames); the other control ids
  // are never spoken.
  scores_.assign(logits_.data<float>(), logits_.data<float>() + V);
  const bool may_end = int64_t(said_.size()) >= c.min_frames;
  for (int64_t id = c.codebook_size; id < V; ++id) {
    if (id != c.codec_eos || !may_end) scores_[size_t(id)] = -std::numeric_limits<float>::infinity();
  }
  const int32_t c0 = int32_t(sampler.Sample(scores_.data(), V, said_));
  if (c0 == c.codec_eos) return std::optional<Frame>();
  said_.push_back(c0);

  Frame frame(size_t(G), 0);
  frame[0] = c0;
  // The predictor sees [normed talker hidden, embedding of code 0, ..., of code G-2].
  OE_RETURN_IF_ERROR(predictor_->Reset());
  OE_RETURN_IF_ERROR(predictor_->FeedHidden(normed_.data<float>(), 1).status());
  predictor_id_.data<int64_t>()[0] = c0;
  OE_RETURN_IF_ERROR(Run(*predictor_embed_));
  for (int64_t g = 1; g < G; ++g) {
    OE_ASSIGN_OR_RETURN(frame[size_t(g)], PredictorStep(sampler, g));
    if (g + 1 < G) {
      predictor_id_.data<int64_t>()[0] = V + (g - 1) * c.codebook_size + frame[size_t(g)];
      OE_RETURN_IF_ERROR(Run(*predictor_embed_));
    }
  }
  unfed_ = frame;
  return std::optional<Frame>(std::move(frame));
}

std::vector<Placement> Talker::placements() const {
  std::vector<Placement> out = {embed_chunk_->placement(), embed_step_->placement()};
  if (embed_hidden_) out.push_back(embed_hidden_->placement());
  for (const auto& p : talker_->placements()) out.push_back(p);
  out.push_back(head_->placement());
  out.push_back(predictor_embed_->placement());
  for (const auto& p : predictor_->placements()) out.push_back(p);
  out.push_back(predictor_head_->placement());
  return out;
}

double Talker::backend_seconds() const {
  return graph_seconds_ + talker_->backend_seconds() + predictor_->backend_seconds();
}

}  // namespace omni_edge::talker
