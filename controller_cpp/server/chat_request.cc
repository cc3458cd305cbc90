#include "server/chat_request.h"

namespace omni_edge::server {

ControllerRequest::ControllerRequest(ChatCompletionRequest chat) : chat_(std::move(chat)) {
  oe_request_default(&request_);
  for (const auto& turn : chat_.messages) messages_.push_back({turn.role.c_str(), turn.text.c_str()});
  for (const auto& item : chat_.media) media_.push_back({item.kind.c_str(), item.bytes.data(), item.bytes.size(), nullptr});
  for (const auto& s : chat_.stop) stop_.push_back(s.c_str());
  request_.messages = messages_.data();
  request_.n_messages = int(messages_.size());
  request_.media = media_.empty() ? nullptr : media_.data();
  request_.n_media = int(media_.size());
  request_.stop_strings = stop_.empty() ? nullptr : stop_.data();
  request_.n_stop_strings = int(stop_.size());
  request_.max_new_tokens = int(chat_.max_tokens);
  request_.ignore_stop_tokens = chat_.ignore_eos ? 1 : 0;
  request_.max_frames = int(chat_.max_audio_frames);
  if (chat_.temperature || chat_.top_p || chat_.top_k || chat_.seed) {
    OeSampling& s = request_.sampling;
    s.use_plan_sampling = 0;
    s.temperature = float(chat_.temperature.value_or(1.0));
    s.top_p = float(chat_.top_p.value_or(1.0));
    s.top_k = int(chat_.top_k.value_or(0));
    s.seed = chat_.seed.value_or(0);
  }
}

}  // namespace omni_edge::server
