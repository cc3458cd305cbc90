// Errors across the boundary: a C error becomes a pending dev.omniedge.OmniEdgeException with the
// C code's name ("hash_mismatch", ...) and message; misuse becomes the usual Java exception.
#ifndef OMNI_EDGE_JNI_ERRORS_H_
#define OMNI_EDGE_JNI_ERRORS_H_

#include <jni.h>

#include <string>

#include "capi/omni_edge.h"

namespace omni_edge::jni {

struct ErrorText {
  std::string code;
  std::string message;
};

// Copies the error's code and message and frees it.
ErrorText TakeError(OeError* error);

void ThrowOmniEdge(JNIEnv* env, const ErrorText& error);
void ThrowIllegalState(JNIEnv* env, const std::string& message);
void ThrowIllegalArgument(JNIEnv* env, const std::string& message);

}  // namespace omni_edge::jni

#endif  // OMNI_EDGE_JNI_ERRORS_H_
