#include "jni/jvm.h"

#include <initializer_list>

namespace omni_edge::jni {
namespace {

JavaClasses g_classes;

jclass GlobalClass(JNIEnv* env, const char* name) {
  jclass local = env->FindClass(name);
  if (local == nullptr) return nullptr;
  auto global = static_cast<jclass>(env->NewGlobalRef(local));
  env->DeleteLocalRef(local);
  return global;
}

}  // namespace

const JavaClasses& Classes() { return g_classes; }

bool LoadClasses(JavaVM* vm, JNIEnv* env) {
  JavaClasses c;
  c.vm = vm;
  if (!(c.exception = GlobalClass(env, "dev/omniedge/OmniEdgeException")) ||
      !(c.exception_init = env->GetMethodID(c.exception, "<init>", "(Ljava/lang/String;Ljava/lang/String;)V")) ||
      !(c.illegal_state = GlobalClass(env, "java/lang/IllegalStateException")) ||
      !(c.illegal_argument = GlobalClass(env, "java/lang/IllegalArgumentException")) ||
      !(c.generation = GlobalClass(env, "dev/omniedge/Generation")) ||
      !(c.on_event = env->GetMethodID(c.generation, "onEvent", "(Ljava/lang/String;JLjava/lang/String;Z[F[S)Z")) ||
      !(c.on_complete = env->GetMethodID(c.generation, "onComplete", "(Ljava/lang/String;Ljava/lang/String;)V")) ||
      !(c.request = GlobalClass(env, "dev/omniedge/Request")) || !(c.sampling = GlobalClass(env, "dev/omniedge/Sampling"))) {
    g_classes = c;
    UnloadClasses(env);
    return false;
  }
  g_classes = c;
  return true;
}

void UnloadClasses(JNIEnv* env) {
  for (jclass c : {g_classes.exception, g_classes.illegal_state, g_classes.illegal_argument, g_classes.generation,
                   g_classes.request, g_classes.sampling}) {
    if (c != nullptr) env->DeleteGlobalRef(c);
  }
  g_classes = JavaClasses{};
}

// jni.h declares the out-parameter void** on the JDK and JNIEnv** on Android: this converts to either.
struct EnvOut {
  JNIEnv** env;
  operator JNIEnv**() const { return env; }
  operator void**() const { return reinterpret_cast<void**>(env); }
};

AttachedThread::AttachedThread(const char* name) {
  JavaVMAttachArgs args{JNI_VERSION_1_6, const_cast<char*>(name), nullptr};
  JNIEnv* env = nullptr;
  if (Classes().vm->AttachCurrentThreadAsDaemon(EnvOut{&env}, &args) == JNI_OK) env_ = env;
}

AttachedThread::~AttachedThread() {
  if (env_ != nullptr) Classes().vm->DetachCurrentThread();
}

GlobalRef& GlobalRef::operator=(GlobalRef&& other) noexcept {
  if (this != &other) {
    Reset();
    ref_ = other.ref_;
    other.ref_ = nullptr;
  }
  return *this;
}

void GlobalRef::Reset() {
  if (ref_ == nullptr) return;
  if (JNIEnv* env = CurrentEnv()) env->DeleteGlobalRef(ref_);
  ref_ = nullptr;
}

JNIEnv* CurrentEnv() {
  void* env = nullptr;
  if (Classes().vm == nullptr || Classes().vm->GetEnv(&env, JNI_VERSION_1_6) != JNI_OK) return nullptr;
  return static_cast<JNIEnv*>(env);
}

}  // namespace omni_edge::jni
