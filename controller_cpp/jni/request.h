// A dev.omniedge.Request read into C memory the worker owns (the Java object may be collected
// while the request waits in the queue), and the OeRequest that points into it.
#ifndef OMNI_EDGE_JNI_REQUEST_H_
#define OMNI_EDGE_JNI_REQUEST_H_

#include <jni.h>

#include <cstdint>
#include <string>
#include <vector>

#include "capi/omni_edge.h"

namespace omni_edge::jni {

class OwnedRequest {
 public:
  // Reads every field; false with a pending Java exception if the object is malformed.
  bool Read(JNIEnv* env, jobject request);
  // The C view: valid while this object lives and is not moved.
  const OeRequest* View();

 private:
  std::string prompt_, system_prompt_;
  bool has_system_prompt_ = false;
  std::vector<int32_t> prompt_ids_;
  std::vector<std::string> stops_;
  std::vector<const char*> stop_ptrs_;
  std::vector<std::string> media_kinds_, media_data_;
  std::vector<OeMedia> media_;
  // A policy plan's observation.
  bool has_observation_ = false;
  std::vector<std::string> camera_names_, camera_images_;
  std::vector<OeCameraImage> cameras_;
  std::vector<float> state_, noise_;
  OeObservation observation_{};
  OeRequest request_{};
};

}  // namespace omni_edge::jni

#endif  // OMNI_EDGE_JNI_REQUEST_H_
