#include "server/openpi_wire.h"

#include <cmath>
#include <cstring>
#include <exception>

#include <msgpack.hpp>

#include "base/little_endian.h"
#include "server/openai_common.h"

namespace omni_edge::server {
namespace {

using Object = msgpack::object;

// A key or string value: str and bin alike (openpi packs its ndarray keys as bin).
std::optional<std::string> Text(const Object& o) {
  if (o.type == msgpack::type::STR) return std::string(o.via.str.ptr, o.via.str.size);
  if (o.type == msgpack::type::BIN) return std::string(o.via.bin.ptr, o.via.bin.size);
  return std::nullopt;
}

const Object* Field(const Object& map, const char* name) {
  for (uint32_t i = 0; i < map.via.map.size; ++i) {
    if (Text(map.via.map.ptr[i].key) == std::string(name)) return &map.via.map.ptr[i].val;
  }
  return nullptr;
}

std::optional<double> Number(const Object& o) {
  switch (o.type) {
    case msgpack::type::POSITIVE_INTEGER: return double(o.via.u64);
    case msgpack::type::NEGATIVE_INTEGER: return double(o.via.i64);
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64: return o.via.f64;
    default: return std::nullopt;
  }
}

struct NdArray {
  std::string dtype;
  std::vector<int64_t> shape;
  const char* data = nullptr;
  size_t size = 0;
  size_t width = 0;  // bytes per value
};

// openpi's ndarray map, checked: a known dtype, a shape whose product matches the bytes.
Result<NdArray> ReadNdArray(const Object& o, const std::string& param) {
  const Object* marker = o.type == msgpack::type::MAP ? Field(o, "__ndarray__") : nullptr;
  if (marker == nullptr) return Refuse(param, "expected a numpy array (openpi's msgpack-numpy encoding)");
  const Object* data = Field(o, "data");
  const Object* dtype = Field(o, "dtype");
  const Object* shape = Field(o, "shape");
  if (data == nullptr || data->type != msgpack::type::BIN || dtype == nullptr || !Text(*dtype) || shape == nullptr ||
      shape->type != msgpack::type::ARRAY || shape->via.array.size > 4) {
    return Refuse(param, "a numpy array needs data (bytes), dtype and a shape of at most 4 dimensions");
  }
  NdArray a{*Text(*dtype), {}, data->via.bin.ptr, data->via.bin.size, 0};
  a.width = a.dtype == "|u1" ? 1 : (a.dtype == "<f4" || a.dtype == "<i4") ? 4 : (a.dtype == "<f8" || a.dtype == "<i8") ? 8 : 0;
  if (a.width == 0) return Refuse(param, "dtype " + a.dtype + " is not read here (uint8, float32/64, int32/64)");
  uint64_t count = 1;
  for (uint32_t i = 0; i < shape->via.array.size; ++i) {
    const Object& d = shape->via.array.ptr[i];
    if (d.type != msgpack::type::POSITIVE_INTEGER || d.via.u64 > (uint64_t(1) << 31)) return Refuse(param, "a bad shape");
    a.shape.push_back(int64_t(d.via.u64));
    count *= d.via.u64;
    if (count > (uint64_t(1) << 32)) return Refuse(param, "too many values");
  }
  if (count * a.width != a.size) {
    return Refuse(param, "data holds " + std::to_string(a.size) + " bytes, the shape asks " + std::to_string(count * a.width));
  }
  return a;
}

// A numeric array or list as float32 values (finite), at most `max` of them.
Result<std::vector<float>> ReadFloats(const Object& o, const std::string& param, size_t max) {
  std::vector<float> out;
  if (o.type == msgpack::type::ARRAY) {
    for (uint32_t i = 0; i < o.via.array.size && out.size() <= max; ++i) {
      auto x = Number(o.via.array.ptr[i]);
      if (!x) return Refuse(param, "expected numbers");
      out.push_back(float(*x));
    }
  } else {
    OE_ASSIGN_OR_RETURN(NdArray a, ReadNdArray(o, param));
    for (size_t i = 0; i < a.size / a.width && out.size() <= max; ++i) {
      const char* p = a.data + i * a.width;
      if (a.dtype == "<f4") { float v; std::memcpy(&v, p, 4); out.push_back(v); }
      else if (a.dtype == "<f8") { double v; std::memcpy(&v, p, 8); out.push_back(float(v)); }
      else if (a.dtype == "<i4") { int32_t v; std::memcpy(&v, p, 4); out.push_back(float(v)); }
      else if (a.dtype == "<i8") { int64_t v; std::memcpy(&v, p, 8); out.push_back(float(v)); }
      else out.push_back(float(uint8_t(*p)));
    }
  }
  if (out.size() > max) return Refuse(param, "more than " + std::to_string(max) + " values");
  for (float v : out) {
    if (!std::isfinite(v)) return Refuse(param, "a value that is not finite");
  }
  return out;
}

// H x W x 3 (or 3 x H x W) uint8 as a 24-bit BMP: rows bottom-up, BGR, each padded to 4 bytes.
Result<std::string> Bmp(const NdArray& a, const std::string& param, int64_t max_side) {
  const bool hwc = a.shape.size() == 3 && a.shape[2] == 3;
  const bool chw = a.shape.size() == 3 && a.shape[0] == 3 && !hwc;
  if (a.dtype != "|u1" || (!hwc && !chw)) return Refuse(param, "expected an H x W x 3 (or 3 x H x W) uint8 image");
  const int64_t h = hwc ? a.shape[0] : a.shape[1], w = hwc ? a.shape[1] : a.shape[2];
  if (h < 1 || w < 1 || h > max_side || w > max_side) {
    return Refuse(param, "each side from 1 to " + std::to_string(max_side) + " pixels");
  }
  const int64_t row = (w * 3 + 3) / 4 * 4;
  std::string out = "BM";
  PutLe32(&out, uint32_t(54 + row * h)), PutLe32(&out, 0), PutLe32(&out, 54);
  PutLe32(&out, 40), PutLe32(&out, uint32_t(w)), PutLe32(&out, uint32_t(h)), PutLe16(&out, 1), PutLe16(&out, 24);
  for (int i = 0; i < 6; ++i) PutLe32(&out, 0);
  const auto* px = reinterpret_cast<const uint8_t*>(a.data);
  for (int64_t y = h - 1; y >= 0; --y) {
    for (int64_t x = 0; x < w; ++x) {
      for (int c = 2; c >= 0; --c) out.push_back(char(hwc ? px[(y * w + x) * 3 + c] : px[(c * h + y) * w + x]));
    }
    out.append(size_t(row - w * 3), '\0');
  }
  return out;
}

Status ReadImages(const Object& o, const OpenPiLimits& limits, PolicyObservation* out) {
  if (o.type != msgpack::type::MAP) return Refuse("images", "expected a map of camera name to image");
  if (o.via.map.size > limits.max_images) return Refuse("images", "more than " + std::to_string(limits.max_images));
  for (uint32_t i = 0; i < o.via.map.size; ++i) {
    auto camera = Text(o.via.map.ptr[i].key);
    if (!camera || camera->empty() || camera->find('\0') != std::string::npos) return Refuse("images", "a camera name");
    OE_ASSIGN_OR_RETURN(NdArray a, ReadNdArray(o.via.map.ptr[i].val, "images." + *camera));
    OE_ASSIGN_OR_RETURN(std::string bmp, Bmp(a, "images." + *camera, limits.max_side));
    out->images.push_back({*camera, std::move(bmp)});
  }
  return Status::Ok();
}

Status ReadKey(const std::string& key, const Object& v, const OpenPiLimits& limits, PolicyObservation* out) {
  if (key == "images") return ReadImages(v, limits, out);
  if (key == "state") {
    OE_ASSIGN_OR_RETURN(out->state, ReadFloats(v, "state", limits.max_values));
  } else if (key == "prompt") {
    auto text = Text(v);
    if (!text || text->size() > limits.max_prompt) return Refuse("prompt", "a string of at most " + std::to_string(limits.max_prompt) + " bytes");
    OE_RETURN_IF_ERROR(NoNul(*text, "prompt"));
    out->prompt = *text;
  } else if (key == "timestamp_ms") {
    auto t = Number(v);
    if (!t || !std::isfinite(*t) || *t < 0) return Refuse("timestamp_ms", "ms since the Unix epoch");
    out->timestamp_ms = *t;
  } else if (key == "noise") {
    OE_ASSIGN_OR_RETURN(NdArray a, ReadNdArray(v, "noise"));
    if (a.dtype != "<f4" || a.shape.size() != 2) return Refuse("noise", "expected a 2-D float32 array (chunk x action dim)");
    OE_ASSIGN_OR_RETURN(out->noise, ReadFloats(v, "noise", limits.max_values));
    out->noise_rows = a.shape[0], out->noise_cols = a.shape[1];
  } else if (key == "seed") {
    if (v.type != msgpack::type::POSITIVE_INTEGER) return Refuse("seed", "a non-negative integer");
    out->seed = v.via.u64;
  } else if (key == "endpoint") {
    auto e = Text(v);
    if (!e || (*e != "infer" && *e != "reset")) return Refuse("endpoint", "infer or reset");
    out->endpoint = *e;
  } else if (key != "session_id") {  // vLLM-Omni's; a connection is one session here
    return Refuse(key, "not read here (an observation has images, state, prompt, timestamp_ms; noise or seed)");
  }
  return Status::Ok();
}

}  // namespace

Result<PolicyObservation> ParseObservation(const std::string& frame, const OpenPiLimits& limits) {
  msgpack::object_handle handle;
  try {  // the library reports malformed input by exceptions: they end here
    const msgpack::unpack_limit bounds(1 << 16, 64, 1 << 26, 1 << 28, 0, 8);
    handle = msgpack::unpack(frame.data(), frame.size(), nullptr, nullptr, bounds);
  } catch (const std::exception& e) {
    return Status::Error("invalid_request", std::string("the frame is not msgpack: ") + e.what());
  }
  const Object& root = handle.get();
  if (root.type != msgpack::type::MAP) return Status::Error("invalid_request", "an observation is a msgpack map");
  PolicyObservation out;
  for (uint32_t i = 0; i < root.via.map.size; ++i) {
    auto key = Text(root.via.map.ptr[i].key);
    if (!key) return Status::Error("invalid_request", "observation keys are strings");
    OE_RETURN_IF_ERROR(ReadKey(*key, root.via.map.ptr[i].val, limits, &out));
  }
  return out;
}

namespace {

void Pack(msgpack::packer<msgpack::sbuffer>& pk, const Json& v) {
  switch (v.type()) {
    case Json::value_t::object:
      pk.pack_map(uint32_t(v.size()));
      for (const auto& [key, item] : v.items()) {
        pk.pack(key);
        Pack(pk, item);
      }
      break;
    case Json::value_t::array:
      pk.pack_array(uint32_t(v.size()));
      for (const Json& item : v) Pack(pk, item);
      break;
    case Json::value_t::string: pk.pack(v.get<std::string>()); break;
    case Json::value_t::boolean: v.get<bool>() ? pk.pack_true() : pk.pack_false(); break;
    case Json::value_t::number_integer: pk.pack_int64(v.get<int64_t>()); break;
    case Json::value_t::number_unsigned: pk.pack_uint64(v.get<uint64_t>()); break;
    case Json::value_t::number_float: pk.pack_double(v.get<double>()); break;
    default: pk.pack_nil(); break;
  }
}

void PackBinKey(msgpack::packer<msgpack::sbuffer>& pk, const char* key) {
  pk.pack_bin(uint32_t(std::strlen(key)));
  pk.pack_bin_body(key, uint32_t(std::strlen(key)));
}

}  // namespace

std::string PackJson(const Json& value) {
  msgpack::sbuffer buffer;
  msgpack::packer<msgpack::sbuffer> pk(&buffer);
  Pack(pk, value);
  return std::string(buffer.data(), buffer.size());
}

std::string PackActions(const std::vector<float>& actions, int64_t rows, int64_t cols, const Json& fields) {
  msgpack::sbuffer buffer;
  msgpack::packer<msgpack::sbuffer> pk(&buffer);
  pk.pack_map(uint32_t(1 + fields.size()));
  pk.pack(std::string("actions"));
  pk.pack_map(4);  // openpi's ndarray: its four keys as bin, which openpi-client's decoder looks for
  PackBinKey(pk, "__ndarray__");
  pk.pack_true();
  PackBinKey(pk, "data");
  pk.pack_bin(uint32_t(actions.size() * sizeof(float)));
  pk.pack_bin_body(reinterpret_cast<const char*>(actions.data()), uint32_t(actions.size() * sizeof(float)));
  PackBinKey(pk, "dtype");
  pk.pack(std::string("<f4"));
  PackBinKey(pk, "shape");
  pk.pack_array(2);
  pk.pack_int64(rows);
  pk.pack_int64(cols);
  for (const auto& [key, item] : fields.items()) {
    pk.pack(key);
    Pack(pk, item);
  }
  return std::string(buffer.data(), buffer.size());
}

}  // namespace omni_edge::server
