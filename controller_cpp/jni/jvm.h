// The JVM side of the bridge: the classes and methods it calls (looked up once, in JNI_OnLoad),
// and RAII for the three JNI resources it holds: a thread's attachment, a frame of local
// references, and a global reference.
#ifndef OMNI_EDGE_JNI_JVM_H_
#define OMNI_EDGE_JNI_JVM_H_

#include <jni.h>

namespace omni_edge::jni {

struct JavaClasses {
  JavaVM* vm = nullptr;
  jclass exception = nullptr;        // dev.omniedge.OmniEdgeException (global reference)
  jmethodID exception_init = nullptr;
  jclass illegal_state = nullptr;    // java.lang.IllegalStateException
  jclass illegal_argument = nullptr; // java.lang.IllegalArgumentException
  jclass generation = nullptr;       // dev.omniedge.Generation
  jmethodID on_event = nullptr;      // boolean onEvent(String, long, String, boolean, float[], short[])
  jmethodID on_complete = nullptr;   // void onComplete(String, String)
  jclass request = nullptr;          // dev.omniedge.Request, whose fields request.cc reads
  jclass sampling = nullptr;         // dev.omniedge.Sampling
};

// Filled by JNI_OnLoad; read-only afterwards.
const JavaClasses& Classes();
// Looks everything up; false (with a pending Java exception) if a class or member is missing.
bool LoadClasses(JavaVM* vm, JNIEnv* env);
void UnloadClasses(JNIEnv* env);

// Attaches the calling native thread to the JVM for its lifetime (once: every callback of the
// worker reuses it) and detaches when it ends.
class AttachedThread {
 public:
  explicit AttachedThread(const char* name);
  ~AttachedThread();
  AttachedThread(const AttachedThread&) = delete;
  AttachedThread& operator=(const AttachedThread&) = delete;
  JNIEnv* env() const { return env_; }

 private:
  JNIEnv* env_ = nullptr;
};

// Every local reference made inside it is freed when it ends (callbacks on a long-lived native
// thread would otherwise accumulate them until the thread detaches).
class LocalFrame {
 public:
  LocalFrame(JNIEnv* env, jint capacity) : env_(env), pushed_(env->PushLocalFrame(capacity) == 0) {}
  ~LocalFrame() {
    if (pushed_) env_->PopLocalFrame(nullptr);
  }
  LocalFrame(const LocalFrame&) = delete;
  LocalFrame& operator=(const LocalFrame&) = delete;
  bool ok() const { return pushed_; }

 private:
  JNIEnv* env_;
  bool pushed_;
};

// A global reference, deleted on the thread that drops it (any attached thread may).
class GlobalRef {
 public:
  GlobalRef() = default;
  GlobalRef(JNIEnv* env, jobject local) : ref_(local ? env->NewGlobalRef(local) : nullptr) {}
  ~GlobalRef() { Reset(); }
  GlobalRef(GlobalRef&& other) noexcept : ref_(other.ref_) { other.ref_ = nullptr; }
  GlobalRef& operator=(GlobalRef&& other) noexcept;
  GlobalRef(const GlobalRef&) = delete;
  GlobalRef& operator=(const GlobalRef&) = delete;
  jobject get() const { return ref_; }
  void Reset();

 private:
  jobject ref_ = nullptr;
};

// The JNIEnv of the calling thread, which must be attached (a Java thread, or an AttachedThread).
JNIEnv* CurrentEnv();

}  // namespace omni_edge::jni

#endif  // OMNI_EDGE_JNI_JVM_H_
