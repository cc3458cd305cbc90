#include "jni/request.h"

#include "jni/errors.h"
#include "jni/jvm.h"
#include "jni/strings.h"

namespace omni_edge::jni {
namespace {

struct Fields {
  jfieldID prompt, prompt_ids, chat, system_prompt, continue_conversation, max_new_tokens, sampling, stop_strings,
      ignore_stop_tokens, max_frames, speech_sampling, prebuffer_ms, media_kinds, media_data;
  jfieldID has_observation, observation_ms, camera_names, camera_images, state, noise, noise_rows, noise_cols, noise_seed, reset_history,
      deadline_ms;
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
         (f.has_observation = env->GetFieldID(c.request, "hasObservation", "Z")) &&
         (f.observation_ms = env->GetFieldID(c.request, "observationTimestampMs", "D")) &&
         (f.camera_names = env->GetFieldID(c.request, "cameraNames", "[Ljava/lang/String;")) &&
         (f.camera_images = env->GetFieldID(c.request, "cameraImages", "[[B")) &&
         (f.state = env->GetFieldID(c.request, "state", "[F")) && (f.noise = env->GetFieldID(c.request, "noise", "[F")) &&
         (f.noise_rows = env->GetFieldID(c.request, "noiseRows", "I")) &&
         (f.noise_cols = env->GetFieldID(c.request, "noiseCols", "I")) &&
         (f.noise_seed = env->GetFieldID(c.request, "noiseSeed", "J")) &&
         (f.reset_history = env->GetFieldID(c.request, "resetHistory", "Z")) &&
         (f.deadline_ms = env->GetFieldID(c.request, "deadlineMs", "D")) &&
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

std::vector<float> Floats(JNIEnv* env, jfloatArray array) {
  std::vector<float> out;
  if (array == nullptr) return out;
  out.resize(size_t(env->GetArrayLength(array)));
  env->GetFloatArrayRegion(array, 0, jsize(out.size()), out.data());
  return out;
}

// Pairs of (name, bytes) from two parallel arrays, copied; false with a pending exception.
bool ReadPairs(JNIEnv* env, jobjectArray names, jobjectArray data, std::vector<std::string>* out_names,
               std::vector<std::string>* out_data) {
  const jsize n = names == nullptr || data == nullptr ? 0 : env->GetArrayLength(names);
  if (n > 0 && env->GetArrayLength(data) != n) return ThrowIllegalArgument(env, "names and data differ in length"), false;
  for (jsize i = 0; i < n; ++i) {
    auto name = static_cast<jstring>(env->GetObjectArrayElement(names, i));
    auto bytes = static_cast<jbyteArray>(env->GetObjectArrayElement(data, i));
    out_names->push_back(FromJava(env, name));
    std::string& copy = out_data->emplace_back(bytes == nullptr ? 0 : size_t(env->GetArrayLength(bytes)), '\0');
    if (!copy.empty()) env->GetByteArrayRegion(bytes, 0, jsize(copy.size()), reinterpret_cast<jbyte*>(copy.data()));
    env->DeleteLocalRef(name);
    env->DeleteLocalRef(bytes);
  }
  return true;
}

}  // namespace

bool OwnedRequest::Read(JNIEnv* env, jobject request) {
  const Fields& f = RequestFields(env);
  if (!f.ok || request == nullptr) {
    if (!env->ExceptionCheck()) ThrowIllegalArgument(env, request == nullptr ? "request is null" : "Request has changed shape");
    return false;
  }
  LocalFrame frame(env, 24);
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
  // Copied: the request may wait in the queue after the call.
  if (!ReadPairs(env, static_cast<jobjectArray>(env->GetObjectField(request, f.media_kinds)),
                 static_cast<jobjectArray>(env->GetObjectField(request, f.media_data)), &media_kinds_, &media_data_)) {
    return false;
  }
  has_observation_ = env->GetBooleanField(request, f.has_observation) == JNI_TRUE;
  if (has_observation_) {
    if (!ReadPairs(env, static_cast<jobjectArray>(env->GetObjectField(request, f.camera_names)),
                   static_cast<jobjectArray>(env->GetObjectField(request, f.camera_images)), &camera_names_,
                   &camera_images_)) {
      return false;
    }
    observation_.timestamp_ms = env->GetDoubleField(request, f.observation_ms);
    state_ = Floats(env, static_cast<jfloatArray>(env->GetObjectField(request, f.state)));
    noise_ = Floats(env, static_cast<jfloatArray>(env->GetObjectField(request, f.noise)));
    observation_.noise_rows = env->GetIntField(request, f.noise_rows);
    observation_.noise_cols = env->GetIntField(request, f.noise_cols);
    observation_.noise_seed = uint64_t(env->GetLongField(request, f.noise_seed));
    observation_.reset_history = env->GetBooleanField(request, f.reset_history) ? 1 : 0;
    if (!noise_.empty() && int64_t(noise_.size()) != int64_t(observation_.noise_rows) * observation_.noise_cols) {
      return ThrowIllegalArgument(env, "noise is not rows x cols values"), false;
    }
  }
  request_.deadline_ms = env->GetDoubleField(request, f.deadline_ms);
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
  cameras_.clear();
  for (size_t i = 0; i < camera_names_.size(); ++i) {
    cameras_.push_back(OeCameraImage{camera_names_[i].c_str(), camera_images_[i].data(), camera_images_[i].size(), nullptr});
  }
  observation_.images = cameras_.empty() ? nullptr : cameras_.data();
  observation_.n_images = int(cameras_.size());
  observation_.state = state_.empty() ? nullptr : state_.data();
  observation_.n_state = int(state_.size());
  observation_.noise = noise_.empty() ? nullptr : noise_.data();
  request_.observation = has_observation_ ? &observation_ : nullptr;
  return &request_;
}

}  // namespace omni_edge::jni
