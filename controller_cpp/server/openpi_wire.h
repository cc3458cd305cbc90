// The OpenPI policy protocol's messages, as openpi's websocket policy server, the openpi-client
// package and vLLM-Omni's /v1/realtime/robot/openpi exchange them: msgpack maps whose numpy
// arrays are openpi's {"__ndarray__": true, "data": bytes, "dtype": "<f4", "shape": [...]}
// (keys as bin or str). An observation is read strictly into what the controller's observation
// request takes; replies are packed back. No transport here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/json_fields.h"
#include "base/status.h"

namespace omni_edge::server {

struct OpenPiLimits {
  size_t max_images = 8;
  int64_t max_side = 4096;  // pixels, each image side
  size_t max_values = 1 << 16;  // state and noise values each
  size_t max_prompt = 4096;
};

struct CameraFrame {
  std::string camera;
  std::string bmp;  // the H x W x 3 uint8 array as a BMP file: lossless, and a format the controller decodes
};

struct PolicyObservation {
  std::string endpoint = "infer";  // "infer" | "reset" (vLLM-Omni's)
  std::vector<CameraFrame> images;  // "images": {camera: H x W x 3 (or 3 x H x W) uint8}
  std::vector<float> state;
  std::string prompt;
  std::optional<double> timestamp_ms;  // capture time, ms since the Unix epoch; absent: on arrival
  std::vector<float> noise;            // an extension: the flow's x_1, [rows, cols] float32
  int64_t noise_rows = 0, noise_cols = 0;
  std::optional<uint64_t> seed;        // vLLM-Omni's: the noise's seed
};

// A frame that is not an observation this server runs is refused with reason "invalid_request"
// naming the key ("images.cam_high: ...").
Result<PolicyObservation> ParseObservation(const std::string& frame, const OpenPiLimits& limits = {});

// JSON as msgpack (objects as maps with str keys): the metadata a connection starts with.
std::string PackJson(const Json& value);
// {"actions": float32 ndarray [rows, cols]} and `fields` (JSON, e.g. server_timing) beside it.
std::string PackActions(const std::vector<float>& actions, int64_t rows, int64_t cols, const Json& fields);

}  // namespace omni_edge::server
