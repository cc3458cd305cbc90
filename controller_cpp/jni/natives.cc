// The native methods of dev.omniedge.NativeBridge. Nothing here throws a C++ exception across
// JNI: every failure becomes a pending Java exception, and every handle is an Engine.
#include <jni.h>

#include <memory>
#include <new>
#include <string>

#include "capi/omni_edge.h"
#include "jni/engine.h"
#include "jni/errors.h"
#include "jni/jvm.h"
#include "jni/request.h"
#include "jni/strings.h"

namespace {

using omni_edge::jni::Engine;

Engine* EngineOf(JNIEnv* env, jlong handle) {
  if (handle == 0) omni_edge::jni::ThrowIllegalState(env, "the engine is closed");
  return reinterpret_cast<Engine*>(handle);
}

// Runs `body`, turning a C++ exception (std::bad_alloc, a failed thread start) into a Java one.
template <typename T, typename Body>
T Guarded(JNIEnv* env, T fallback, Body body) {
  try {
    return body();
  } catch (const std::exception& e) {
    omni_edge::jni::ThrowIllegalState(env, std::string("omni-edge native error: ") + e.what());
  } catch (...) {
    omni_edge::jni::ThrowIllegalState(env, "omni-edge native error");
  }
  return fallback;
}

}  // namespace

extern "C" {

JNIEXPORT jint JNI_OnLoad(JavaVM* vm, void*) {
  void* env = nullptr;
  if (vm->GetEnv(&env, JNI_VERSION_1_6) != JNI_OK) return JNI_ERR;
  return omni_edge::jni::LoadClasses(vm, static_cast<JNIEnv*>(env)) ? JNI_VERSION_1_6 : JNI_ERR;
}

JNIEXPORT void JNI_OnUnload(JavaVM* vm, void*) {
  void* env = nullptr;
  if (vm->GetEnv(&env, JNI_VERSION_1_6) == JNI_OK) omni_edge::jni::UnloadClasses(static_cast<JNIEnv*>(env));
}

JNIEXPORT jstring JNICALL Java_dev_omniedge_NativeBridge_version(JNIEnv* env, jclass) {
  const std::string text = std::string(oe_version()) + " (protocol " + std::to_string(oe_protocol_version()) + ")";
  return omni_edge::jni::ToJava(env, text);
}

JNIEXPORT jlong JNICALL Java_dev_omniedge_NativeBridge_create(JNIEnv* env, jclass, jstring plan, jboolean allow_unqualified,
                                                             jint threads) {
  return Guarded<jlong>(env, 0, [&] {
    auto engine = std::make_unique<Engine>(omni_edge::jni::FromJava(env, plan), allow_unqualified == JNI_TRUE, int(threads));
    return reinterpret_cast<jlong>(engine.release());  // owned by the Java object until close()
  });
}

JNIEXPORT void JNICALL Java_dev_omniedge_NativeBridge_awaitOpen(JNIEnv* env, jclass, jlong handle) {
  Engine* engine = EngineOf(env, handle);
  if (engine == nullptr) return;
  if (auto error = engine->AwaitOpen()) omni_edge::jni::ThrowOmniEdge(env, *error);
}

JNIEXPORT jstring JNICALL Java_dev_omniedge_NativeBridge_info(JNIEnv* env, jclass, jlong handle) {
  Engine* engine = EngineOf(env, handle);
  if (engine == nullptr) return nullptr;
  OeSession* session = engine->session();
  if (session == nullptr) return omni_edge::jni::ThrowIllegalState(env, "the plan is not loaded"), nullptr;
  char* json = nullptr;
  if (OeError* error = oe_session_info(session, &json)) return omni_edge::jni::ThrowOmniEdge(env, omni_edge::jni::TakeError(error)), nullptr;
  jstring out = omni_edge::jni::ToJava(env, json);
  oe_string_free(json);
  return out;
}

JNIEXPORT void JNICALL Java_dev_omniedge_NativeBridge_submit(JNIEnv* env, jclass, jlong handle, jobject request,
                                                            jobject generation) {
  Engine* engine = EngineOf(env, handle);
  if (engine == nullptr) return;
  if (generation == nullptr) return omni_edge::jni::ThrowIllegalArgument(env, "generation is null");
  Guarded<int>(env, 0, [&] {
    auto owned = std::make_unique<omni_edge::jni::OwnedRequest>();
    if (owned->Read(env, request)) engine->Submit(std::move(owned), omni_edge::jni::GlobalRef(env, generation));
    return 0;
  });
}

JNIEXPORT void JNICALL Java_dev_omniedge_NativeBridge_cancel(JNIEnv* env, jclass, jlong handle) {
  if (Engine* engine = EngineOf(env, handle)) engine->Cancel();
}

JNIEXPORT void JNICALL Java_dev_omniedge_NativeBridge_close(JNIEnv* env, jclass, jlong handle) {
  Engine* engine = EngineOf(env, handle);
  if (engine == nullptr) return;
  if (engine->OnWorkerThread()) return omni_edge::jni::ThrowIllegalState(env, "close() from the engine's own thread");
  std::unique_ptr<Engine> owned(engine);  // joins the worker, closes the session
}

JNIEXPORT jlong JNICALL Java_dev_omniedge_NativeBridge_serverStart(JNIEnv* env, jclass, jstring plan, jstring host,
                                                                  jint port, jstring api_key, jint max_sessions,
                                                                  jint threads) {
  return Guarded<jlong>(env, 0, [&]() -> jlong {
    const std::string plan_path = omni_edge::jni::FromJava(env, plan), address = omni_edge::jni::FromJava(env, host),
                      key = omni_edge::jni::FromJava(env, api_key);
    OeServerConfig config;
    oe_server_config_default(&config);
    config.plan_path = plan_path.c_str();
    config.host = address.c_str();
    config.port = int(port);
    config.api_key = key.c_str();
    config.max_sessions = int(max_sessions);
    config.threads = int(threads);
    OeServer* server = nullptr;
    if (OeError* error = oe_server_start(&config, &server)) {
      omni_edge::jni::ThrowOmniEdge(env, omni_edge::jni::TakeError(error));
      return 0;
    }
    return reinterpret_cast<jlong>(server);  // owned by the Java Server until close()
  });
}

JNIEXPORT jstring JNICALL Java_dev_omniedge_NativeBridge_serverUrl(JNIEnv* env, jclass, jlong server) {
  if (server == 0) return omni_edge::jni::ThrowIllegalState(env, "the server is closed"), nullptr;
  return omni_edge::jni::ToJava(env, oe_server_url(reinterpret_cast<OeServer*>(server)));
}

JNIEXPORT void JNICALL Java_dev_omniedge_NativeBridge_serverStop(JNIEnv*, jclass, jlong server) {
  oe_server_stop(reinterpret_cast<OeServer*>(server));
}

}  // extern "C"
