// Little-endian integers appended to a byte string: the file headers written here (WAV, BMP).
#pragma once

#include <cstdint>
#include <string>

namespace omni_edge {

inline void PutLe16(std::string* s, uint32_t v) {
  s->push_back(char(v & 0xff));
  s->push_back(char((v >> 8) & 0xff));
}

inline void PutLe32(std::string* s, uint32_t v) {
  for (int i = 0; i < 4; ++i) s->push_back(char((v >> (8 * i)) & 0xff));
}

}  // namespace omni_edge
