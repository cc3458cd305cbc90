// The files `omni-edge-run act` reads: OBS.json (what a policy acts on) and NOISE.npy (the flow's
// initial noise), read strictly. OBS.json:
//   {"timestamp_ms": ..., "images": {"<camera>": "file.png", ...}, "state": [...], "prompt": "...",
//    "reset_history": false}
// A camera's value may also be a list of files: its frame history, oldest first (a plan that
// keeps one).
// Image files are named relative to OBS.json's directory and may not leave it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace omni_edge::tools {

struct ObservationFile {
  double timestamp_ms = -1;
  std::vector<std::pair<std::string, std::string>> images;  // (camera, absolute path), in the file's order
  std::vector<float> state;
  std::string prompt;
  bool reset_history = false;
};

Result<ObservationFile> ReadObservationFile(const std::string& path);

// A NumPy .npy array of float32, 2-D, C order (format 1.0-3.0); its rows x cols.
struct NpyFloat32 {
  int64_t rows = 0, cols = 0;
  std::vector<float> values;
};
Result<NpyFloat32> ParseNpyFloat32(const std::string& bytes, const std::string& where);

}  // namespace omni_edge::tools
