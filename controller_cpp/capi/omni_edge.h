/* omni-edge C ABI: the one surface JNI, the CLI and other languages build on.
 * Opaque handles, no exceptions, every fallible call returns an OeError* (NULL = success)
 * that the caller frees with oe_error_free(). Strings returned to the caller are freed
 * with oe_string_free(). */
#ifndef OMNI_EDGE_C_API_H_
#define OMNI_EDGE_C_API_H_

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define OE_API __declspec(dllexport)
#else
#define OE_API __attribute__((visibility("default")))
#endif

typedef struct OeError OeError;

/* Library version ("0.1.0") and the highest stage-contract protocol it speaks. */
OE_API const char* oe_version(void);
OE_API int oe_protocol_version(void);

/* Stable machine code (e.g. "hash_mismatch") and a message for people. */
OE_API const char* oe_error_reason(const OeError* error);
OE_API const char* oe_error_message(const OeError* error);
OE_API void oe_error_free(OeError* error);
OE_API void oe_string_free(char* text);

/* Re-hashes every file of an artifact directory and re-reads its validation reports.
 * On success *out_json holds {"directory", "manifest", "numerical", "task", "qualified"}
 * and *out_qualified (if not NULL) is 1 when both reports passed, else 0. */
OE_API OeError* oe_manifest_verify(const char* directory, char** out_json, int* out_qualified);

/* Decodes JSON text of a contract type ("buffer", "state", "request", "event", "device")
 * and writes its canonical encoding to *out_json. */
OE_API OeError* oe_contract_canonical_json(const char* type_name, const char* json_text, char** out_json);

#ifdef __cplusplus
}
#endif

#endif /* OMNI_EDGE_C_API_H_ */
