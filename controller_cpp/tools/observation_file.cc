#include "tools/observation_file.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "base/json_fields.h"
#include "base/platform/os.h"

namespace omni_edge::tools {
namespace {

namespace fs = std::filesystem;

Status Bad(const std::string& what) { return Status::Error("invalid_observation", what); }

// `name` inside `dir`: no absolute path, no way out through ".." or through a symlink.
Result<std::string> Inside(const fs::path& dir, const std::string& name, const std::string& where) {
  const fs::path rel = fs::path(name).lexically_normal();
  if (name.empty() || rel.is_absolute() || rel.has_root_name() || rel.has_root_directory()) {
    return Bad(where + ": a path relative to the observation's directory, not '" + name + "'");
  }
  std::error_code ec;
  const fs::path base = fs::weakly_canonical(dir, ec), file = fs::weakly_canonical(dir / rel, ec);
  const auto [stop, unused] = std::mismatch(base.begin(), base.end(), file.begin(), file.end());
  if (ec || rel.empty() || *rel.begin() == ".." || stop != base.end()) {
    return Bad(where + ": '" + name + "' leaves the observation's directory");
  }
  return file.string();
}

}  // namespace

Result<ObservationFile> ReadObservationFile(const std::string& path) {
  OE_ASSIGN_OR_RETURN(std::string text, platform::ReadWholeFile(path));
  OE_ASSIGN_OR_RETURN(Json j, ParseJson(text, path));
  if (!j.is_object()) return Bad(path + ": an observation is a JSON object");
  FieldReader r(j, path);
  ObservationFile out;
  out.timestamp_ms = r.Number("timestamp_ms");
  const Json* images = r.Object("images");
  const Json* state = r.Array("state", false);
  out.prompt = r.String("prompt", false, false);
  out.reset_history = r.Bool("reset_history", false, false);
  if (!r.ok()) return Bad(r.status().message());
  if (Status st = r.Done(); !st.ok()) return Bad(st.message());
  if (!(out.timestamp_ms >= 0 && out.timestamp_ms < 1e15)) return Bad(path + ".timestamp_ms: ms since the Unix epoch");
  const fs::path dir = fs::absolute(fs::path(path)).parent_path();
  if (images->empty()) return Bad(path + ".images: one image per camera");
  for (const auto& [camera, value] : images->items()) {
    const std::string at = path + ".images." + camera;
    if (value.is_array() && (value.empty() || value.size() > 16)) return Bad(at + ": 1 to 16 files (oldest first)");
    const Json names = value.is_array() ? value : Json::array({value});
    for (const auto& name : names) {
      if (!name.is_string()) return Bad(at + ": a file name, or a list of them (its frame history, oldest first)");
      OE_ASSIGN_OR_RETURN(std::string file, Inside(dir, name.get<std::string>(), at));
      out.images.emplace_back(camera, std::move(file));
    }
  }
  for (size_t i = 0; state != nullptr && i < state->size(); ++i) {
    const Json& v = (*state)[i];
    if (!v.is_number() || v.is_boolean() || !std::isfinite(v.get<double>())) {
      return Bad(path + ".state[" + std::to_string(i) + "]: a finite number");
    }
    out.state.push_back(v.get<float>());
  }
  return out;
}

Result<NpyFloat32> ParseNpyFloat32(const std::string& b, const std::string& where) {
  const auto bad = [&](const std::string& what) { return Status::Error("invalid_noise", where + ": " + what); };
  if (b.size() < 10 || b.compare(0, 6, "\x93NUMPY") != 0) return bad("not a NumPy .npy file");
  const int major = uint8_t(b[6]);
  size_t header_len = 0, start = 0;
  if (major == 1) {
    header_len = uint8_t(b[8]) | (size_t(uint8_t(b[9])) << 8);
    start = 10;
  } else if (major == 2 || major == 3) {
    if (b.size() < 12) return bad("a truncated header");
    header_len = uint8_t(b[8]) | (size_t(uint8_t(b[9])) << 8) | (size_t(uint8_t(b[10])) << 16) | (size_t(uint8_t(b[11])) << 24);
    start = 12;
  } else {
    return bad("format version " + std::to_string(major) + " is not 1, 2 or 3");
  }
  if (header_len > 65536 || start + header_len > b.size()) return bad("a truncated header");
  const std::string header = b.substr(start, header_len);
  // The header is a Python dict literal; these three keys, written as NumPy writes them.
  if (header.find("'descr': '<f4'") == std::string::npos) return bad("the noise is float32 ('<f4'), this file is not");
  if (header.find("'fortran_order': False") == std::string::npos) return bad("a C-order array is expected");
  const size_t shape_at = header.find("'shape': (");
  if (shape_at == std::string::npos) return bad("no shape in the header");
  const size_t open = shape_at + 10, close = header.find(')', open);
  if (close == std::string::npos) return bad("an unterminated shape");
  std::vector<int64_t> dims;
  std::string digits;
  for (size_t i = open; i <= close; ++i) {
    const char c = header[i];
    if (c >= '0' && c <= '9') {
      if (digits.size() > 9) return bad("a dimension above 10^9");
      digits += c;
    } else if (c == ',' || c == ')' || c == ' ') {
      if (!digits.empty()) dims.push_back(std::stoll(digits)), digits.clear();
    } else {
      return bad("a malformed shape");
    }
  }
  if (dims.size() != 2) return bad("the noise is 2-D (chunk, action_dim)");
  NpyFloat32 out{dims[0], dims[1], {}};
  if (out.rows * out.cols > (int64_t(1) << 24)) return bad("more than 16M values");
  const size_t data = start + header_len, n = size_t(out.rows * out.cols);
  if (b.size() - data != n * sizeof(float)) return bad("the data is not rows x cols float32 values");
  out.values.resize(n);
  std::memcpy(out.values.data(), b.data() + data, n * sizeof(float));
  for (float v : out.values) {
    if (!std::isfinite(v)) return bad("the noise holds a NaN or an infinity");
  }
  return out;
}

}  // namespace omni_edge::tools
