// A chat completion request as the controller's C ABI request: the OeRequest and the storage its
// pointers point into, kept together for as long as the request runs.
#pragma once

#include <vector>

#include "capi/omni_edge.h"
#include "server/openai_chat.h"

namespace omni_edge::server {

class ControllerRequest {
 public:
  // Sampling: the plan's unless the client set temperature, top_p, top_k or seed; then the unset
  // ones take OpenAI's defaults (temperature 1, top_p 1) and no top-k, seed 0.
  explicit ControllerRequest(ChatCompletionRequest chat);
  ControllerRequest(const ControllerRequest&) = delete;
  ControllerRequest& operator=(const ControllerRequest&) = delete;

  const OeRequest& get() const { return request_; }
  const ChatCompletionRequest& chat() const { return chat_; }

 private:
  ChatCompletionRequest chat_;
  std::vector<OeChatMessage> messages_;
  std::vector<OeMedia> media_;
  std::vector<const char*> stop_;
  OeRequest request_;
};

}  // namespace omni_edge::server
