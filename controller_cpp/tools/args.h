// Flag values for omni-edge-run's subcommands: a missing value, a non-number or an
// out-of-range number is a usage error (exit 2) naming the flag, never undefined behaviour.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "capi/omni_edge.h"

namespace omni_edge::tools {

class ArgReader {
 public:
  ArgReader(int argc, char** argv, int first) : argc_(argc), argv_(argv), i_(first - 1) {}

  // The next flag, or nullptr at the end.
  const char* Next() { return ++i_ < argc_ ? argv_[i_] : nullptr; }

  const char* Value(const char* flag) {
    if (i_ + 1 >= argc_) Die("%s needs a value", flag);
    return argv_[++i_];
  }

  double Number(const char* flag) {
    const char* v = Value(flag);
    char* end = nullptr;
    const double d = std::strtod(v, &end);
    // A finite value inside int64 range: casting NaN, inf or 1e300 to an integer is undefined.
    if (end == v || *end != '\0' || !std::isfinite(d) || std::fabs(d) > 9.0e15) {
      Die("%s: '%s' is not a finite number (at most 9e15 in size)", flag, v);
    }
    return d;
  }

  int64_t Whole(const char* flag, double lo, double hi) {
    const double d = Number(flag);
    if (d < lo || d > hi || d != std::floor(d)) Die("%s takes a whole number from %.0f to %.0f", flag, lo, hi);
    return int64_t(d);
  }

 private:
  template <typename... A>
  [[noreturn]] static void Die(const char* format, A... args) {
    std::fprintf(stderr, "omni-edge-run: ");
    std::fprintf(stderr, format, args...);
    std::fprintf(stderr, "\n");
    std::exit(2);
  }

  int argc_;
  char** argv_;
  int i_;
};

// The sampling flags both subcommands take; true if `flag` was one (it overrides the plan's).
inline bool ReadSamplingFlag(ArgReader& args, const std::string& flag, OeSampling* s) {
  if (flag == "--temperature") s->temperature = float(args.Number("--temperature"));
  else if (flag == "--top-k") s->top_k = int(args.Whole("--top-k", 0, 1 << 30));
  else if (flag == "--top-p") s->top_p = float(args.Number("--top-p"));
  else if (flag == "--min-p") s->min_p = float(args.Number("--min-p"));
  else if (flag == "--repetition-penalty") s->repetition_penalty = float(args.Number("--repetition-penalty"));
  else if (flag == "--seed") s->seed = uint64_t(args.Whole("--seed", 0, 9.0e15));
  else return false;
  s->use_plan_sampling = 0;
  return true;
}

// "1,2,3" -> token ids; false if an item is empty, not a number or outside [0, INT32_MAX].
inline bool ParseIds(const std::string& text, std::vector<int32_t>* ids) {
  std::stringstream s(text);
  std::string item;
  while (std::getline(s, item, ',')) {
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < 0 || v > INT32_MAX) return false;
    ids->push_back(int32_t(v));
  }
  return !ids->empty();
}

}  // namespace omni_edge::tools
