// Strings across the boundary. JNI's *StringUTF functions speak "modified UTF-8" (no 4-byte
// sequences: CheckJNI aborts on an emoji), so text goes through UTF-16 with the JDK's own
// replacement rules: an ill-formed UTF-8 sequence or a lone surrogate becomes U+FFFD.
#ifndef OMNI_EDGE_JNI_STRINGS_H_
#define OMNI_EDGE_JNI_STRINGS_H_

#include <jni.h>

#include <string>

namespace omni_edge::jni {

// A new local String from UTF-8 bytes; nullptr (with a pending OutOfMemoryError) if it fails.
jstring ToJava(JNIEnv* env, const std::string& utf8);
// The String's text as UTF-8 (an empty string for null).
std::string FromJava(JNIEnv* env, jstring text);

std::u16string Utf8ToUtf16(const std::string& utf8);
std::string Utf16ToUtf8(const std::u16string& utf16);

}  // namespace omni_edge::jni

#endif  // OMNI_EDGE_JNI_STRINGS_H_
