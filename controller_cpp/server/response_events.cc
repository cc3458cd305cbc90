#include "server/response_events.h"

#include "base/wav.h"

namespace omni_edge::server {

void Collected::Take(const OeEvent& ev, std::string* piece, std::string* pcm) {
  piece->clear();
  pcm->clear();
  auto json = ParseJson(ev.json, "event");
  if (!json.ok()) return;
  const std::string stream = ev.stream;
  if (ev.terminal) {
    (stream == "audio" ? audio_terminal : text_terminal) = std::move(*json);
  } else if (stream == "text" && json->value("kind", "") == "token") {
    *piece = json->value("text", "");
    text += *piece;
  } else if (stream == "audio" && ev.data != nullptr && ev.n_samples > 0 && AppendPcm16(ev.data, ev.n_samples, ev.dtype, pcm)) {
    pcm16 += *pcm;
    samples += ev.n_samples;
  }
}

bool Collected::Failed(std::string* reason, std::string* message) const {
  for (const Json* t : {&text_terminal, &audio_terminal}) {
    if (!t->is_null() && t->value("kind", "") == "error") {
      *reason = t->value("reason", std::string("failed"));
      *message = t->value("error", std::string("the request failed"));
      return true;
    }
  }
  return false;
}

Json Collected::Metrics() const {
  Json out = Json::object();
  for (const auto& [name, t] : {std::pair<const char*, const Json*>{"text", &text_terminal}, {"audio", &audio_terminal}}) {
    if (t->is_null()) continue;
    Json m = *t;
    m.erase("seq");
    m.erase("chunk_frames");  // one number per chunk: long, and in the trace
    out[name] = std::move(m);
  }
  return out;
}

}  // namespace omni_edge::server
