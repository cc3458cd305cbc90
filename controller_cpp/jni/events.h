// One event of a request, handed to its dev.omniedge.Generation on the worker thread.
#ifndef OMNI_EDGE_JNI_EVENTS_H_
#define OMNI_EDGE_JNI_EVENTS_H_

#include <jni.h>

#include "capi/omni_edge.h"
#include "jni/errors.h"

namespace omni_edge::jni {

// Calls generation.onEvent(stream, stage, json, terminal, pcm float[] | pcm16 short[]); returns
// true to go on, false to cancel the request (the Java side said so, or a Java exception).
bool DeliverEvent(JNIEnv* env, jobject generation, const OeEvent& event);
// Calls generation.onComplete(code, message): null code for success.
void DeliverComplete(JNIEnv* env, jobject generation, const ErrorText* error);

}  // namespace omni_edge::jni

#endif  // OMNI_EDGE_JNI_EVENTS_H_
