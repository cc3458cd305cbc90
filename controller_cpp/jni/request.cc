#include "jni/request.h"

#include "jni/errors.h"
#include "jni/jvm.h"
#include "jni/strings.h"

namespace omni_edge::jni {
namespace {

struct Fields {
  jfieldID prompt, prompt_ids, chat, system_prompt, continue_conversation, max_new_tokens, sampling, stop_strings,
      ignore_stop_tokens, max_frames, speech_sampling, prebuffer_ms, media_kinds, media_data;
  jfieldID use_plan, temperature, top_k, top_p, min_p, repetition_penalty, seed;
  bool ok = false;
};

Fields LookUp(JNIEnv* env) {
  const JavaClasses& c = Classes();
  Fields f{};
  const char* sampling = "Ldev/omniedge/Sampling;";
  f.ok = (f.prompt = env->GetFieldID(c.request, "prompt", "Ljava/lang/String;")) &&
         (f.prompt_ids = env->GetFieldID(c.request, "promptIds", "[I")) &&
         (f.chat = env->GetFieldID(c.request, "chat", "Z")) &&
         (f.system_prompt = env->GetFieldID(c.request, "systemPrompt", "Ljava/lang/String;")) &&
         (f.continue_conversation = env->GetFieldID(c.request, "continueConversation", "Z")) &&
         (f.max_new_tokens = env->GetFieldID(c.request, "maxNewTokens", "I")) &&
         (f.sampling = env->GetFieldID(c.request, "sampling", sampling)) &&
         (f.stop_strings = env->GetFieldID(c.request, "stopStrings", "[Ljava/lang/String;")) &&
         (f.ignore_stop_tokens = env->GetFieldID(c.request, "ignoreStopTokens", "Z")) &&
         (f.max_frames = env->GetFieldID(c.request, "maxFrames", "I")) &&
         (f.speech_sampling = env->GetFieldID(c.request, "speechSampling", sampling)) &&
         (f.prebuffer_ms = env->GetFieldID(c.request, "prebufferMs", "D")) &&
         (f.media_kinds = env->GetFieldID(c.request, "mediaKinds", "[Ljava/lang/String;")) &&
         (f.media_data = env->GetFieldID(c.request, "mediaData", "[[B")) &&
         (f.use_plan = env->GetFieldID(c.sampling, "usePlan", "Z")) &&
         (f.temperature = env->GetFieldID(c.sampling, "temperature", "F")) &&
         (f.top_k = env->GetFieldID(c.sampling, "topK", "I")) && (f.top_p = env->GetFieldID(c.sampling, "topP", "F")) &&
         (f.min_p = env->GetFieldID(c.sampling, "minP", "F")) &&
         (f.repetition_penalty = env->GetFieldID(c.sampling, "repetitionPenalty", "F")) &&
         (f.seed = env->GetFieldID(c.sampling, "seed", "J"));
  return f;
}

// Field IDs stay valid while the class is loaded: looked up once per process.
const Fields& RequestFields(JNIEnv* env) {
  static const Fields fields = LookUp(env);
  return fields;
}

void ReadSampling(JNIEnv* env, const Fields& f, jobject s, OeSampling* out) {
  if (s == nullptr) return;  // the default: the plan's sampling
  out->use_plan_sampling = env->GetBooleanField(s, f.use_plan) ? 1 : 0;
  out->temperature = env->GetFloatField(s, f.temperature);
  out->top_k = env->GetIntField(s, f.top_k);
  out->top_p = env->GetFloatField(s, f.top_p);
  out->min_p = env->GetFloatField(s, f.min_p);
  out->repetition_penalty = env->GetFloatField(s, f.repetition_penalty);
  out->seed = uint64_t(env->GetLongField(s, f.seed));
}

}  // namespace

bool OwnedRequest::Read(JNIEnv* env, jobject request) {
  const Fields& f = RequestFields(env);
  if (!f.ok || request == nullptr) {
    if (!env->ExceptionCheck()) ThrowIllegalArgument(env, request == nullptr ? "request is null" : "Request has changed shape");
    return false;
  }
  LocalFrame frame(env, 16);
  if (!frame.ok()) return false;
  oe_request_default(&request_);
  prompt_ = FromJava(env, static_cast<jstring>(env->GetObjectField(request, f.prompt)));
  auto system = static_cast<jstring>(env->GetObjectField(request, f.system_prompt));
  has_system_prompt_ = system != nullptr;
  system_prompt_ = FromJava(env, system);
  if (auto ids = static_cast<jintArray>(env->GetObjectField(request, f.prompt_ids))) {
    prompt_ids_.resize(size_t(env->GetArrayLength(ids)));
    env->GetIntArrayRegion(ids, 0, jsize(prompt_ids_.size()), reinterpret_cast<jint*>(prompt_ids_.data()));
  }
  if (auto stops = static_cast<jobjectArray>(env->GetObjectField(request, f.stop_strings))) {
    for (jsize i = 0, n = env->GetArrayLength(stops); i < n; ++i) {
      auto stop = static_cast<jstring>(env->GetObjectArrayElement(stops, i));
      stops_.push_back(FromJava(env, stop));
      env->DeleteLocalRef(stop);
    }
  }
  auto kinds = static_cast<jobjectArray>(env->GetObjectField(request, f.media_kinds));
  auto data = static_cast<jobjectArray>(env->GetObjectField(request, f.media_data));
  const jsize n_media = kinds == nullptr || data == nullptr ? 0 : env->GetArrayLength(kinds);
  if (n_media > 0 && env->GetArrayLength(data) != n_media) return ThrowIllegalArgument(env, "media kinds and data differ"), false;
  for (jsize i = 0; i < n_media; ++i) {  // copied: the request may wait in the queue after the call
    auto kind = static_cast<jstring>(env->GetObjectArrayElement(kinds, i));
    auto bytes = static_cast<jbyteArray>(env->GetObjectArrayElement(data, i));
    media_kinds_.push_back(FromJava(env, kind));
    std::string& copy = media_data_.emplace_back(bytes == nullptr ? 0 : size_t(env->GetArrayLength(bytes)), '\0');
    if (!copy.empty()) env->GetByteArrayRegion(bytes, 0, jsize(copy.size()), reinterpret_cast<jbyte*>(copy.data()));
    env->DeleteLocalRef(kind);
    env->DeleteLocalRef(bytes);
  }
  for (const std::string* text : {&prompt_, &system_prompt_}) {
    if (text->find('\0') != std::string::npos) return ThrowIllegalArgument(env, "a prompt contains a NUL character"), false;
  }
  for (const std::string& stop : stops_) {
    if (stop.empty() || stop.find('\0') != std::string::npos) return ThrowIllegalArgument(env, "a stop string is empty or has a NUL"), false;
  }
  request_.chat = env->GetBooleanField(request, f.chat) ? 1 : 0;
  request_.continue_conversation = env->GetBooleanField(request, f.continue_conversation) ? 1 : 0;
  request_.max_new_tokens = env->GetIntField(request, f.max_new_tokens);
  request_.ignore_stop_tokens = env->GetBooleanField(request, f.ignore_stop_tokens) ? 1 : 0;
  request_.max_frames = env->GetIntField(request, f.max_frames);
  request_.prebuffer_ms = env->GetDoubleField(request, f.prebuffer_ms);
  ReadSampling(env, f, env->GetObjectField(request, f.sampling), &request_.sampling);
  ReadSampling(env, f, env->GetObjectField(request, f.speech_sampling), &request_.speech_sampling);
  return !env->ExceptionCheck();
}

const OeRequest* OwnedRequest::View() {
  request_.prompt = prompt_.c_str();
  request_.system_prompt = has_system_prompt_ ? system_prompt_.c_str() : nullptr;
  request_.prompt_ids = prompt_ids_.empty() ? nullptr : prompt_ids_.data();
  request_.n_prompt_ids = int(prompt_ids_.size());
  stop_ptrs_.clear();
  for (const std::string& s : stops_) stop_ptrs_.push_back(s.c_str());
  request_.stop_strings = stop_ptrs_.empty() ? nullptr : stop_ptrs_.data();
  request_.n_stop_strings = int(stop_ptrs_.size());
  media_.clear();
  for (size_t i = 0; i < media_kinds_.size(); ++i) {
    media_.push_back(OeMedia{media_kinds_[i].c_str(), media_data_[i].data(), media_data_[i].size(), nullptr});
  }
  request_.media = media_.empty() ? nullptr : media_.data();
  request_.n_media = int(media_.size());
  return &request_;
}

}  // namespace omni_edge::jni
