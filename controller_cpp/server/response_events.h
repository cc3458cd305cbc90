// A request's events as a response is made of them: the text stream's pieces and the audio
// stream's samples as 16-bit PCM bytes, and each stream's terminal event. No transport here.
#pragma once

#include <cstdint>
#include <string>

#include "base/json_fields.h"
#include "capi/omni_edge.h"

namespace omni_edge::server {

struct Collected {
  std::string text;   // every token's text so far
  std::string pcm16;  // every sample so far, little-endian int16
  int64_t samples = 0;
  Json text_terminal, audio_terminal;  // null until the stream ends

  // Takes one event; `piece` / `pcm` get what it added (else they are emptied).
  void Take(const OeEvent& ev, std::string* piece, std::string* pcm);
  // Whether a stream ended with an error (then `reason` and `message` say what).
  bool Failed(std::string* reason, std::string* message) const;
  // The text stream's terminal, or the audio's for a speech plan: the request's end.
  const Json& Terminal() const { return text_terminal.is_null() ? audio_terminal : text_terminal; }
  // {"text": {...}, "audio": {...}}: the terminal events' metrics (kind and seq dropped).
  Json Metrics() const;
};

}  // namespace omni_edge::server
