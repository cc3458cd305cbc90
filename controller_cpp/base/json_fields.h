// Strict reading of JSON objects on nlohmann::json. Wrong types, unknown fields and
// out-of-range values are refused with a message naming the field, exactly as the Python
// reference (omni_edge/contracts/fields.py) does. The first error sticks: later reads return
// defaults, so a decoder reads its fields in order and checks status() once.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace omni_edge {

using Json = nlohmann::json;

// Parses JSON text, refusing invalid UTF-8 and nesting deeper than `max_depth` (the parser is
// not asked to build what would only be refused).
Result<Json> ParseJson(const std::string& text, const std::string& where, int max_depth = 128);

// "array", "string", ... as the Python reference names JSON types in messages.
const char* JsonTypeName(const Json& value);

// invalid_field: "<path>: <what>", the one shape every field refusal takes.
Status FieldError(const std::string& path, const std::string& what);

// An int64 or a refusal naming `path`; refuses booleans, floats and values outside int64.
Status CheckInt(const Json& value, const std::string& path, std::optional<int64_t> minimum, int64_t* out);

// Typed reads of third-party formats (tokenizer.json, ...) that allow unknown fields: a missing
// or null key gives the fallback, a present key of the wrong type is an error naming it.
Result<std::string> GetString(const Json& object, const char* key, const std::string& fallback, const std::string& where);
Result<bool> GetBool(const Json& object, const char* key, bool fallback, const std::string& where);
Result<int64_t> GetInt(const Json& object, const char* key, int64_t fallback, const std::string& where);

class FieldReader {
 public:
  FieldReader(const Json& data, std::string where);

  std::string String(const char* name, bool required = true, bool non_empty = true, std::string fallback = "");
  std::optional<std::string> OptionalString(const char* name);
  int64_t Int(const char* name, bool required = true, std::optional<int64_t> minimum = std::nullopt,
              int64_t fallback = 0);
  bool Bool(const char* name, bool required = true, bool fallback = false);
  double Number(const char* name, bool required = true, double fallback = 0.0);
  // Return nullptr when absent/null (and optional) or after an error.
  const Json* Array(const char* name, bool required = true);
  const Json* Object(const char* name, bool required = true);
  // Marks `name` as read without checking it (for sections decoded elsewhere).
  const Json* Raw(const char* name);

  std::string Path(const std::string& name) const { return where_ + "." + name; }
  void Fail(Status status);
  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  // The sticky status, else a refusal of the first field never read.
  Status Done() const;

 private:
  // The value of `name`, or nullptr if absent (refused when required).
  const Json* Take(const char* name, bool required);

  const Json* data_;
  std::string where_;
  std::set<std::string> seen_;
  Status status_;
};

}  // namespace omni_edge
