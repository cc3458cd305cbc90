#include "base/json_fields.h"

#include <cmath>
#include <limits>

namespace omni_edge {

Status FieldError(const std::string& path, const std::string& what) {
  return Status::Error("invalid_field", path + ": " + what);
}

namespace {

// Depth of brackets outside strings; a cheap guard before the real parser.
bool NestingWithin(const std::string& text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return false;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return true;
}

}  // namespace

Result<Json> ParseJson(const std::string& text, const std::string& where, int max_depth) {
  if (!NestingWithin(text, max_depth)) {
    return Status::Error("invalid_json", where + ": nesting deeper than " + std::to_string(max_depth));
  }
  Json parsed = Json::parse(text, /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return Status::Error("invalid_json", where + ": not valid JSON");
  // Strings must be valid UTF-8, or dumping them later would fail.
  try {
    (void)parsed.dump();
  } catch (const Json::exception&) {
    return Status::Error("invalid_json", where + ": invalid UTF-8 in a string");
  }
  return parsed;
}

const char* JsonTypeName(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::boolean: return "boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: return "integer";
    case Json::value_t::number_float: return "number";
    case Json::value_t::string: return "string";
    case Json::value_t::array: return "array";
    case Json::value_t::object: return "object";
    default: return "binary";
  }
}

Status CheckInt(const Json& value, const std::string& path, std::optional<int64_t> minimum, int64_t* out) {
  if (!value.is_number_integer()) {
    return FieldError(path, std::string("expected an integer, got ") + JsonTypeName(value));
  }
  int64_t v = 0;
  if (value.is_number_unsigned()) {
    const uint64_t u = value.get<uint64_t>();
    if (u > uint64_t(std::numeric_limits<int64_t>::max())) return FieldError(path, "integer out of 64-bit range");
    v = int64_t(u);
  } else {
    v = value.get<int64_t>();
  }
  if (minimum && v < *minimum) {
    return FieldError(path, "must be >= " + std::to_string(*minimum) + ", got " + std::to_string(v));
  }
  *out = v;
  return Status::Ok();
}

namespace {

const Json* Member(const Json& object, const char* key) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(key);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

}  // namespace

Result<std::string> GetString(const Json& object, const char* key, const std::string& fallback, const std::string& where) {
  const Json* v = Member(object, key);
  if (v == nullptr) return fallback;
  if (!v->is_string()) return FieldError(where + "." + key, std::string("expected a string, got ") + JsonTypeName(*v));
  return v->get<std::string>();
}

Result<bool> GetBool(const Json& object, const char* key, bool fallback, const std::string& where) {
  const Json* v = Member(object, key);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) return FieldError(where + "." + key, std::string("expected a boolean, got ") + JsonTypeName(*v));
  return v->get<bool>();
}

Result<int64_t> GetInt(const Json& object, const char* key, int64_t fallback, const std::string& where) {
  const Json* v = Member(object, key);
  if (v == nullptr) return fallback;
  int64_t out = 0;
  OE_RETURN_IF_ERROR(CheckInt(*v, where + "." + key, std::nullopt, &out));
  return out;
}

FieldReader::FieldReader(const Json& data, std::string where) : data_(&data), where_(std::move(where)) {
  if (!data.is_object()) status_ = FieldError(where_, std::string("expected an object, got ") + JsonTypeName(data));
}

void FieldReader::Fail(Status status) {
  if (status_.ok() && !status.ok()) status_ = std::move(status);
}

const Json* FieldReader::Take(const char* name, bool required) {
  seen_.insert(name);
  if (!ok()) return nullptr;
  auto it = data_->find(name);
  if (it == data_->end()) {
    if (required) Fail(FieldError(Path(name), "required field is missing"));
    return nullptr;
  }
  return &*it;
}

std::string FieldReader::String(const char* name, bool required, bool non_empty, std::string fallback) {
  const Json* v = Take(name, required);
  if (!ok() || v == nullptr || (v->is_null() && !required)) return fallback;
  if (!v->is_string()) {
    Fail(FieldError(Path(name), std::string("expected a string, got ") + JsonTypeName(*v)));
    return fallback;
  }
  std::string s = v->get<std::string>();
  if (non_empty && s.empty()) {
    Fail(FieldError(Path(name), "must be a non-empty string"));
    return fallback;
  }
  return s;
}

std::optional<std::string> FieldReader::OptionalString(const char* name) {
  const Json* v = Take(name, false);
  if (!ok() || v == nullptr || v->is_null()) return std::nullopt;
  if (!v->is_string()) {
    Fail(FieldError(Path(name), std::string("expected a string, got ") + JsonTypeName(*v)));
    return std::nullopt;
  }
  return v->get<std::string>();
}

int64_t FieldReader::Int(const char* name, bool required, std::optional<int64_t> minimum, int64_t fallback) {
  const Json* v = Take(name, required);
  if (!ok() || v == nullptr || (v->is_null() && !required)) return fallback;
  int64_t out = fallback;
  Fail(CheckInt(*v, Path(name), minimum, &out));
  return ok() ? out : fallback;
}

bool FieldReader::Bool(const char* name, bool required, bool fallback) {
  const Json* v = Take(name, required);
  if (!ok() || v == nullptr || (v->is_null() && !required)) return fallback;
  if (!v->is_boolean()) {
    Fail(FieldError(Path(name), std::string("expected a boolean, got ") + JsonTypeName(*v)));
    return fallback;
  }
  return v->get<bool>();
}

double FieldReader::Number(const char* name, bool required, double fallback) {
  const Json* v = Take(name, required);
  if (!ok() || v == nullptr || (v->is_null() && !required)) return fallback;
  if (!v->is_number()) {
    Fail(FieldError(Path(name), std::string("expected a number, got ") + JsonTypeName(*v)));
    return 0.0;
  }
  const double d = v->get<double>();
  if (!std::isfinite(d)) {
    Fail(FieldError(Path(name), "must be finite"));
    return 0.0;
  }
  return d;
}

const Json* FieldReader::Array(const char* name, bool required) {
  const Json* v = Take(name, required);
  if (!ok() || v == nullptr || (v->is_null() && !required)) return nullptr;
  if (!v->is_array()) {
    Fail(FieldError(Path(name), std::string("expected an array, got ") + JsonTypeName(*v)));
    return nullptr;
  }
  return v;
}

const Json* FieldReader::Object(const char* name, bool required) {
  const Json* v = Take(name, required);
  if (!ok() || v == nullptr || (v->is_null() && !required)) return nullptr;
  if (!v->is_object()) {
    Fail(FieldError(Path(name), std::string("expected an object, got ") + JsonTypeName(*v)));
    return nullptr;
  }
  return v;
}

const Json* FieldReader::Raw(const char* name) { return Take(name, false); }

Status FieldReader::Done() const {
  if (!ok()) return status_;
  for (auto it = data_->begin(); it != data_->end(); ++it) {
    if (seen_.count(it.key()) == 0) return FieldError(Path(it.key()), "unknown field");
  }
  return Status::Ok();
}

}  // namespace omni_edge
