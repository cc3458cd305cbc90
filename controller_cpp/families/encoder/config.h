// The "encoder" section of a media encoder stage (one-shot: llm_generation): which media it
// reads (image or audio), how (its style), the checkpoint's preprocessor_config.json, the width
// of the rows it emits and the width of its input rows, and its graphs (role "encoder").
// Style "qwen2.5-omni" (the default): one graph per image patch grid "TxHxW", or the audio chunk
// graph "chunk". Style "minicpmo" (MiniCPM-V / MiniCPM-o 4.5): one graph per image slice size
// "RxC" (rows x columns of patches; each slice -> query_num rows), or one audio piece graph per
// bucket of mel frames ("1000", "3000"; the largest is chunk_frames, the reference's 30 s piece;
// each -> one row per pool_step encoder frames); a piece runs the smallest that holds it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <array>
#include <optional>

#include "base/json_fields.h"
#include "runtime/plan.h"

namespace omni_edge::encoder {

// The preprocessor config is a file of the artifact: it is read when the worker opens, after the
// artifact was verified, never while the plan is parsed.
struct EncoderConfig final : StageConfig {
  std::string modality;      // image | audio
  std::string preprocessor;  // absolute path of preprocessor_config.json
  int64_t hidden_size = 0;   // of each emitted row (the thinker's hidden size)
  int64_t input_width = 0;   // floats per input row: a patch (image), or the mel bins (audio)
  int64_t chunk_frames = 0;  // audio: mel frames per chunk graph run
  std::string style = "qwen2.5-omni";
  int64_t query_num = 0;  // minicpmo image: rows per slice
  int64_t pool_step = 0;  // minicpmo audio: encoder frames per row
  bool minicpm() const { return style == "minicpmo"; }
  std::vector<std::string> files() const override { return {preprocessor}; }
};

Result<std::shared_ptr<const EncoderConfig>> ParseEncoder(const Json& j, const StagePlan& stage, const std::string& where);

// "1x32x32" -> {1, 32, 32}; nullopt for anything else.
std::optional<std::array<int64_t, 3>> ParseGrid(const std::string& key);
// "24x42" -> {24, 42} (a slice's rows and columns of patches); nullopt for anything else.
std::optional<std::array<int64_t, 2>> ParseSliceSize(const std::string& key);

}  // namespace omni_edge::encoder
