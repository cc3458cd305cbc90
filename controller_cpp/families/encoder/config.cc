#include "families/encoder/config.h"

#include <algorithm>
#include <filesystem>

namespace omni_edge::encoder {

namespace {

// N positive integers of at most 6 digits joined by 'x'.
template <size_t N>
std::optional<std::array<int64_t, N>> ParseSizes(const std::string& key) {
  std::array<int64_t, N> out{};
  size_t at = 0;
  for (size_t i = 0; i < N; ++i) {
    const size_t end = i + 1 < N ? key.find('x', at) : key.size();
    if (end == std::string::npos || end == at || end - at > 6) return std::nullopt;
    int64_t v = 0;
    for (size_t k = at; k < end; ++k) {
      if (key[k] < '0' || key[k] > '9') return std::nullopt;
      v = v * 10 + (key[k] - '0');
    }
    if (v < 1) return std::nullopt;
    out[i] = v;
    at = end + 1;
  }
  return out;
}

}  // namespace

std::optional<std::array<int64_t, 3>> ParseGrid(const std::string& key) { return ParseSizes<3>(key); }
std::optional<std::array<int64_t, 2>> ParseSliceSize(const std::string& key) { return ParseSizes<2>(key); }

Result<std::shared_ptr<const EncoderConfig>> ParseEncoder(const Json& j, const StagePlan& stage, const std::string& where) {
  auto c = std::make_shared<EncoderConfig>();
  FieldReader r(j, where);
  c->modality = r.String("modality");
  c->preprocessor = ResolvePath(stage.artifact, r.String("preprocessor"));
  c->hidden_size = r.Int("hidden_size", true, 1);
  c->input_width = r.Int("input_width", true, 1);
  c->chunk_frames = r.Int("chunk_frames", false, 2, 0);
  c->style = r.String("style", false, true, "qwen2.5-omni");
  c->query_num = r.Int("query_num", false, 1, 0);
  c->pool_step = r.Int("pool_step", false, 1, 0);
  if (!r.ok()) return r.status();
  OE_RETURN_IF_ERROR(r.Done());
  if (c->modality != "image" && c->modality != "audio") {
    return PlanError(where + ".modality: must be image or audio, got '" + c->modality + "'");
  }
  if (c->style != "qwen2.5-omni" && c->style != "minicpmo") {
    return PlanError(where + ".style: must be qwen2.5-omni or minicpmo, got '" + c->style + "'");
  }
  if (stage.execution_type != "llm_generation") return PlanError(where + ": an encoder stage is llm_generation (one-shot)");
  // Input sources put encoders in series (A -> B -> thinker): B starts when A ended and passes
  // A's rows on before its own.
  if (!std::filesystem::is_regular_file(c->preprocessor)) {
    return Status::Error("file_missing", where + ".preprocessor: " + c->preprocessor);
  }
  const std::string stage_where = where.substr(0, where.rfind('.'));
  OE_RETURN_IF_ERROR(RequireGraphs(stage, stage_where, "encoder", {}));
  const auto& graphs = stage.graphs.at("encoder").graphs;
  if (c->minicpm()) {
    if (c->modality == "image") {
      if (c->query_num < 1) return PlanError(where + ".query_num: the rows of each slice (minicpmo image)");
      for (const auto& [key, ref] : graphs) {
        if (!ParseSliceSize(key)) return PlanError(stage_where + ".graphs.encoder.graphs." + key + ": a key is a slice size RxC");
      }
      if (graphs.empty()) return PlanError(stage_where + ".graphs.encoder: no graph for any slice size");
    } else {
      if (c->pool_step < 1 || c->chunk_frames < 2 * c->pool_step) {
        return PlanError(where + ".pool_step and chunk_frames: a piece of frames and the frames per row (minicpmo audio)");
      }
      int64_t largest = 0;
      for (const auto& [key, ref] : graphs) {
        const auto frames = ParseSizes<1>(key);
        if (!frames || (*frames)[0] > c->chunk_frames) {
          return PlanError(stage_where + ".graphs.encoder.graphs." + key + ": a key is a piece's mel frames, at most chunk_frames");
        }
        largest = std::max(largest, (*frames)[0]);
      }
      if (largest != c->chunk_frames) return PlanError(stage_where + ".graphs.encoder: no graph of chunk_frames frames (the largest piece)");
    }
  } else if (c->modality == "image") {
    for (const auto& [key, ref] : graphs) {
      if (!ParseGrid(key)) return PlanError(stage_where + ".graphs.encoder.graphs." + key + ": a key is a patch grid TxHxW");
    }
    if (graphs.empty()) return PlanError(stage_where + ".graphs.encoder: no graph for any image grid");
  } else {
    if (c->chunk_frames < 2 || c->chunk_frames % 4) return PlanError(where + ".chunk_frames: a multiple of 4 (audio)");
    if (graphs.size() != 1 || graphs.count("chunk") == 0) return PlanError(stage_where + ".graphs.encoder: one graph, \"chunk\"");
  }
  return std::shared_ptr<const EncoderConfig>(std::move(c));
}

}  // namespace omni_edge::encoder
