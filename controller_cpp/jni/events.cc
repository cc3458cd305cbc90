#include "jni/events.h"

#include <cstring>

#include "jni/jvm.h"
#include "jni/strings.h"

namespace omni_edge::jni {
namespace {

// The audio of an event as a new Java array: float[] for float32, short[] for int16.
bool PcmArrays(JNIEnv* env, const OeEvent& e, jfloatArray* floats, jshortArray* shorts) {
  if (e.data == nullptr || e.n_samples <= 0) return true;
  const auto n = jsize(e.n_samples);
  if (std::strcmp(e.dtype, "int16") == 0) {
    *shorts = env->NewShortArray(n);
    if (*shorts != nullptr) env->SetShortArrayRegion(*shorts, 0, n, static_cast<const jshort*>(e.data));
    return *shorts != nullptr;
  }
  *floats = env->NewFloatArray(n);
  if (*floats != nullptr) env->SetFloatArrayRegion(*floats, 0, n, static_cast<const jfloat*>(e.data));
  return *floats != nullptr;
}

}  // namespace

bool DeliverEvent(JNIEnv* env, jobject generation, const OeEvent& e) {
  LocalFrame frame(env, 8);  // every reference below is freed when the event is delivered
  if (!frame.ok()) return env->ExceptionClear(), false;
  jstring stream = ToJava(env, e.stream ? e.stream : "");
  jstring json = ToJava(env, e.json ? e.json : "{}");
  jfloatArray floats = nullptr;
  jshortArray shorts = nullptr;
  if (stream == nullptr || json == nullptr || !PcmArrays(env, e, &floats, &shorts)) return env->ExceptionClear(), false;
  const jboolean go_on = env->CallBooleanMethod(generation, Classes().on_event, stream, jlong(e.stage_id), json,
                                                jboolean(e.terminal != 0), floats, shorts);
  if (env->ExceptionCheck()) return env->ExceptionClear(), false;  // Generation catches its listener's; this is an Error
  return go_on == JNI_TRUE;
}

void DeliverComplete(JNIEnv* env, jobject generation, const ErrorText* error) {
  LocalFrame frame(env, 4);
  if (!frame.ok()) return env->ExceptionClear();
  jstring code = error ? ToJava(env, error->code) : nullptr;
  jstring message = error ? ToJava(env, error->message) : nullptr;
  env->CallVoidMethod(generation, Classes().on_complete, code, message);
  if (env->ExceptionCheck()) env->ExceptionClear();
}

}  // namespace omni_edge::jni
