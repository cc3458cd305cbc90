// The "encoder" section of a media encoder stage (one-shot: llm_generation): which media it
// reads (image or audio), the checkpoint's preprocessor_config.json, the width of the rows it
// emits and the width of its input rows, and its graphs (role "encoder": one graph per image patch grid "TxHxW", or the audio
// chunk graph "chunk").
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/json_fields.h"
#include <array>
#include <optional>
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
  std::vector<std::string> files() const override { return {preprocessor}; }
};

Result<std::shared_ptr<const EncoderConfig>> ParseEncoder(const Json& j, const StagePlan& stage, const std::string& where);

// "1x32x32" -> {1, 32, 32}; nullopt for anything else.
std::optional<std::array<int64_t, 3>> ParseGrid(const std::string& key);

}  // namespace omni_edge::encoder
