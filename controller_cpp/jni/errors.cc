#include "jni/errors.h"

#include "jni/jvm.h"
#include "jni/strings.h"

namespace omni_edge::jni {

ErrorText TakeError(OeError* error) {
  ErrorText text{oe_error_reason(error), oe_error_message(error)};
  oe_error_free(error);
  return text;
}

void ThrowOmniEdge(JNIEnv* env, const ErrorText& error) {
  const JavaClasses& c = Classes();
  LocalFrame frame(env, 4);
  if (!frame.ok()) return;  // OutOfMemoryError is pending
  jstring code = ToJava(env, error.code), message = ToJava(env, error.message);
  if (code == nullptr || message == nullptr) return;
  auto exception = static_cast<jthrowable>(env->NewObject(c.exception, c.exception_init, code, message));
  if (exception != nullptr) env->Throw(exception);
}

void ThrowIllegalState(JNIEnv* env, const std::string& message) {
  env->ThrowNew(Classes().illegal_state, message.c_str());  // ASCII messages only
}

void ThrowIllegalArgument(JNIEnv* env, const std::string& message) {
  env->ThrowNew(Classes().illegal_argument, message.c_str());
}

}  // namespace omni_edge::jni
