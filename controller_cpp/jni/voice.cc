// The native methods of dev.omniedge.VoiceSession: the C ABI's realtime session (oe_realtime_*)
// over an engine's open session. Its events reach the Java listener from the caller's thread and
// from each response's own native thread, which is attached to the JVM for its lifetime.
#include <jni.h>

#include <memory>
#include <string>
#include <vector>

#include "capi/omni_edge.h"
#include "jni/engine.h"
#include "jni/errors.h"
#include "jni/jvm.h"
#include "jni/strings.h"

namespace {

using omni_edge::jni::GlobalRef;

struct Voice {
  GlobalRef listener;          // dev.omniedge.VoiceSession.Listener
  jmethodID on_event = nullptr;  // void onEvent(String)
  OeRealtime* realtime = nullptr;
};

// The calling thread's JNIEnv, attaching a native thread (a response's) until it ends.
JNIEnv* CallbackEnv() {
  JNIEnv* env = nullptr;
  JavaVM* vm = omni_edge::jni::Classes().vm;
  if (vm->GetEnv(reinterpret_cast<void**>(&env), JNI_VERSION_1_6) == JNI_OK) return env;
  thread_local std::unique_ptr<omni_edge::jni::AttachedThread> attached;
  attached = std::make_unique<omni_edge::jni::AttachedThread>("omni-edge-voice");
  return attached->env();
}

void OnVoiceEvent(const char* event_json, void* user) {
  auto* voice = static_cast<Voice*>(user);
  JNIEnv* env = CallbackEnv();
  if (env == nullptr) return;
  omni_edge::jni::LocalFrame frame(env, 4);
  if (!frame.ok()) return;
  jstring text = omni_edge::jni::ToJava(env, event_json);
  env->CallVoidMethod(voice->listener.get(), voice->on_event, text);
  if (env->ExceptionCheck()) env->ExceptionClear();  // a listener's failure does not end the conversation
}

Voice* VoiceOf(JNIEnv* env, jlong handle) {
  if (handle == 0) omni_edge::jni::ThrowIllegalState(env, "the voice session is closed");
  return reinterpret_cast<Voice*>(handle);
}

}  // namespace

extern "C" {

JNIEXPORT jlong JNICALL Java_dev_omniedge_NativeBridge_voiceOpen(JNIEnv* env, jclass, jlong engine_handle,
                                                                jstring options, jobject listener) {
  if (engine_handle == 0) return omni_edge::jni::ThrowIllegalState(env, "the engine is closed"), 0;
  if (listener == nullptr) return omni_edge::jni::ThrowIllegalArgument(env, "listener is null"), 0;
  OeSession* session = reinterpret_cast<omni_edge::jni::Engine*>(engine_handle)->session();
  if (session == nullptr) return omni_edge::jni::ThrowIllegalState(env, "the plan is not loaded"), 0;
  auto voice = std::make_unique<Voice>();
  voice->listener = GlobalRef(env, listener);
  jclass type = env->GetObjectClass(listener);
  voice->on_event = env->GetMethodID(type, "onEvent", "(Ljava/lang/String;)V");
  env->DeleteLocalRef(type);
  if (voice->on_event == nullptr) return 0;  // NoSuchMethodError pending
  const std::string opts = options == nullptr ? "" : omni_edge::jni::FromJava(env, options);
  if (OeError* error = oe_realtime_open(session, opts.c_str(), OnVoiceEvent, voice.get(), &voice->realtime)) {
    omni_edge::jni::ThrowOmniEdge(env, omni_edge::jni::TakeError(error));
    return 0;
  }
  return reinterpret_cast<jlong>(voice.release());  // owned by the Java VoiceSession until close()
}

JNIEXPORT void JNICALL Java_dev_omniedge_NativeBridge_voiceSend(JNIEnv* env, jclass, jlong handle, jstring event) {
  Voice* voice = VoiceOf(env, handle);
  if (voice == nullptr || event == nullptr) return;
  oe_realtime_send(voice->realtime, omni_edge::jni::FromJava(env, event).c_str());
}

JNIEXPORT void JNICALL Java_dev_omniedge_NativeBridge_voiceAppend(JNIEnv* env, jclass, jlong handle, jshortArray pcm,
                                                                 jint offset, jint length) {
  Voice* voice = VoiceOf(env, handle);
  if (voice == nullptr) return;
  if (pcm == nullptr || offset < 0 || length < 0 || offset + length > env->GetArrayLength(pcm)) {
    return omni_edge::jni::ThrowIllegalArgument(env, "pcm, offset and length out of range");
  }
  std::vector<jshort> samples(static_cast<size_t>(length));
  env->GetShortArrayRegion(pcm, offset, length, samples.data());
  oe_realtime_append_pcm16(voice->realtime, reinterpret_cast<const int16_t*>(samples.data()), length);
}

JNIEXPORT jstring JNICALL Java_dev_omniedge_NativeBridge_voiceInfo(JNIEnv* env, jclass, jlong handle) {
  Voice* voice = VoiceOf(env, handle);
  if (voice == nullptr) return nullptr;
  char* json = nullptr;
  if (OeError* error = oe_realtime_info(voice->realtime, &json)) {
    return omni_edge::jni::ThrowOmniEdge(env, omni_edge::jni::TakeError(error)), nullptr;
  }
  jstring out = omni_edge::jni::ToJava(env, json);
  oe_string_free(json);
  return out;
}

JNIEXPORT void JNICALL Java_dev_omniedge_NativeBridge_voiceClose(JNIEnv* env, jclass, jlong handle) {
  std::unique_ptr<Voice> voice(reinterpret_cast<Voice*>(handle));
  if (voice) oe_realtime_close(voice->realtime);  // the response in flight ends; no event after it
}

}  // extern "C"
