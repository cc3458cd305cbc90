#include "pipeline/policy_io.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <set>

#include "base/platform/os.h"
#include "runtime/plan.h"

namespace omni_edge::pipeline {
namespace {

constexpr size_t kMaxImageBytes = size_t(64) << 20;

// `count` finite numbers of type T (0: 1 to 65536 of them).
template <typename T>
Status ReadNumbers(const Json* array, const std::string& where, size_t count, std::vector<T>* out) {
  if (array == nullptr) return Status::Ok();
  if (count == 0 ? (array->empty() || array->size() > 65536) : array->size() != count) {
    return PlanError(where + ": " + (count ? std::to_string(count) + " numbers expected" : std::string("1 to 65536 numbers")) +
                     ", got " + std::to_string(array->size()));
  }
  for (size_t i = 0; i < array->size(); ++i) {
    const Json& v = (*array)[i];
    if (!v.is_number() || v.is_boolean() || !std::isfinite(v.get<double>())) {
      return PlanError(where + "[" + std::to_string(i) + "]: a finite number");
    }
    out->push_back(v.get<T>());
  }
  return Status::Ok();
}

}  // namespace

Status ReadStrings(const Json* array, const std::string& where, size_t count, std::vector<std::string>* out) {
  if (array == nullptr) return Status::Ok();
  if (array->size() != count) {
    return PlanError(where + ": " + std::to_string(count) + " entries expected, got " + std::to_string(array->size()));
  }
  for (size_t i = 0; i < array->size(); ++i) {
    const Json& v = (*array)[i];
    if (!v.is_string() || v.get<std::string>().empty()) return PlanError(where + "[" + std::to_string(i) + "]: a non-empty string");
    out->push_back(v.get<std::string>());
  }
  return Status::Ok();
}

Status ReadTriple(const Json* array, const std::string& where, bool positive, std::array<float, 3>* out) {
  if (array == nullptr) return Status::Ok();
  if (array->size() != 3) return PlanError(where + ": three numbers (R, G, B)");
  for (size_t i = 0; i < 3; ++i) {
    const Json& v = (*array)[i];
    if (!v.is_number() || (positive && v.get<double>() <= 0)) {
      return PlanError(where + "[" + std::to_string(i) + "]: " + (positive ? "a positive number" : "a number"));
    }
    (*out)[i] = v.get<float>();
  }
  return Status::Ok();
}

Status ReadFloats(const Json* array, const std::string& where, size_t count, std::vector<float>* out) {
  return ReadNumbers(array, where, count, out);
}

Status ReadDoubles(const Json* array, const std::string& where, size_t count, std::vector<double>* out) {
  return ReadNumbers(array, where, count, out);
}

Result<ActionSpec> ParseActions(const Json& j, int64_t action_dim, const std::string& where) {
  ActionSpec a;
  FieldReader r(j, where);
  a.schema_version = r.Int("schema_version", true, 1);
  const Json* names = r.Array("names");
  const Json* units = r.Array("units");
  a.dt_ms = r.Number("dt_ms");
  if (!r.ok()) return r.status();
  OE_RETURN_IF_ERROR(r.Done());
  if (a.schema_version != 1) return PlanError(where + ".schema_version: 1 is the only version, got " + std::to_string(a.schema_version));
  OE_RETURN_IF_ERROR(ReadStrings(names, where + ".names", size_t(action_dim), &a.names));
  OE_RETURN_IF_ERROR(ReadStrings(units, where + ".units", size_t(action_dim), &a.units));
  if (std::set<std::string>(a.names.begin(), a.names.end()).size() != a.names.size()) {
    return PlanError(where + ".names: each dimension has its own name");
  }
  if (!(a.dt_ms > 0 && a.dt_ms <= 60000)) return PlanError(where + ".dt_ms: in (0, 60000]");
  return a;
}

double NowUnixMs() {
  return std::chrono::duration<double, std::milli>(std::chrono::system_clock::now().time_since_epoch()).count();
}

Status InvalidObservation(const std::string& what) { return Status::Error("invalid_observation", what); }

Status CheckAge(double timestamp_ms, double max_age_ms, const char* when) {
  const double age = NowUnixMs() - timestamp_ms;
  if (max_age_ms > 0 && age > max_age_ms) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "the observation is %.1f ms old %s; this plan acts on observations up to %.1f ms old",
                  age, when, max_age_ms);
    return Status::Error("stale_observation", buf);
  }
  return Status::Ok();
}

Status CheckCaptureTime(const Observation& o, double max_age_ms) {
  if (o.timestamp_ms < 0) return InvalidObservation("the observation has no capture time (timestamp_ms)");
  if (o.timestamp_ms > NowUnixMs() + 1000) {
    return InvalidObservation("the observation was captured more than 1 s in the future: clocks disagree");
  }
  return CheckAge(o.timestamp_ms, max_age_ms, "when it arrives");
}

Result<std::vector<std::vector<std::string>>> CameraImages(const Observation& o,
                                                           const std::vector<std::string>& cameras,
                                                           size_t max_per_camera) {
  std::vector<std::vector<std::string>> images(cameras.size());
  for (const auto& cam : o.images) {
    size_t k = 0;
    while (k < cameras.size() && cameras[k] != cam.camera) ++k;
    if (k == cameras.size()) {
      std::string have;
      for (const auto& name : cameras) have += (have.empty() ? "" : ", ") + name;
      return InvalidObservation("camera '" + cam.camera + "' is not one of this policy's cameras (" + have + ")");
    }
    if (images[k].size() == max_per_camera) {
      return InvalidObservation("camera '" + cam.camera + "' has more than " + std::to_string(max_per_camera) +
                                (max_per_camera == 1 ? " image" : " images (its frame history, oldest first)"));
    }
    std::string bytes = cam.image.data;
    if (bytes.empty()) {
      auto read = platform::ReadWholeFile(cam.image.path);
      if (!read.ok()) return InvalidObservation("camera '" + cam.camera + "': " + read.status().message());
      bytes = std::move(read.value());
    }
    if (bytes.size() > kMaxImageBytes) return InvalidObservation("camera '" + cam.camera + "': an image file of more than 64 MB");
    images[k].push_back(std::move(bytes));
  }
  for (size_t k = 0; k < images.size(); ++k) {
    if (images[k].empty()) return InvalidObservation("no image from camera '" + cameras[k] + "'");
  }
  return images;
}

Result<std::vector<float>> InitialNoise(const Observation& o, int64_t rows, int64_t cols) {
  if (o.noise.empty()) {  // x_1 ~ N(0, 1), reproducible from the seed
    std::mt19937_64 gen(o.noise_seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> noise(size_t(rows * cols));
    for (float& v : noise) v = normal(gen);
    return noise;
  }
  if (o.noise_shape.size() != 2 || o.noise_shape[0] != rows || o.noise_shape[1] != cols) {
    std::string shape;
    for (int64_t d : o.noise_shape) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
    return InvalidObservation("the noise has shape (" + shape + "); this policy's is (" + std::to_string(rows) + ", " +
                              std::to_string(cols) + ")");
  }
  return o.noise;
}

Output ActionEvent(const ActionSpec& spec, const Json& identity, const float* x, int64_t chunk, int64_t dims,
                             int64_t stride, const ActionTiming& t, const Json& extra) {
  const double age_at_emission = t.produced_ms - t.timestamp_ms;
  double lateness = 0;
  bool missed = false;
  if (t.deadline_ms > 0) {
    lateness = t.produced_ms - (t.timestamp_ms + t.deadline_ms);
    missed = lateness > 0;
  }
  Json actions = Json::array(), targets = Json::array();
  std::string bytes;
  bytes.reserve(size_t(chunk * dims) * sizeof(float));
  for (int64_t k = 0; k < chunk; ++k) {
    const float* row = x + k * stride;
    actions.push_back(std::vector<float>(row, row + dims));
    bytes.append(reinterpret_cast<const char*>(row), size_t(dims) * sizeof(float));
    targets.push_back(t.timestamp_ms + double(k) * spec.dt_ms);
  }
  Output out;
  out.kind = "action";
  out.fields = {{"schema_version", spec.schema_version},
                {"actions", std::move(actions)},
                {"action_names", spec.names},
                {"action_units", spec.units},
                {"chunk_size", chunk},
                {"action_dim", dims},
                {"dt_ms", spec.dt_ms},
                {"observation_timestamp_ms", t.timestamp_ms},
                {"produced_ms", t.produced_ms},
                {"target_times_ms", std::move(targets)},
                {"observation_age_ms", {{"at_start", t.age_at_start_ms}, {"at_emission", age_at_emission}}},
                {"deadline_ms", t.deadline_ms},
                {"deadline_missed", missed},
                {"lateness_ms", t.deadline_ms > 0 ? Json(lateness) : Json()},
                {"model", identity}};
  for (const auto& [key, value] : extra.items()) out.fields[key] = value;
  out.payloads.push_back({"actions", "float32", {chunk, dims}, std::move(bytes)});
  return out;
}

}  // namespace omni_edge::pipeline
