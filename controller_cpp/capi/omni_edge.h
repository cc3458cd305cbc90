/* omni-edge C ABI: the one surface JNI, the CLI and other languages build on.
 * Opaque handles, no exceptions, every fallible call returns an OeError* (NULL = success)
 * that the caller frees with oe_error_free(). Strings returned to the caller are freed
 * with oe_string_free(). */
#ifndef OMNI_EDGE_C_API_H_
#define OMNI_EDGE_C_API_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define OE_API __declspec(dllexport)
#else
#define OE_API __attribute__((visibility("default")))
#endif

typedef struct OeError OeError;

/* Library version ("0.3.0": one session and one request for every plan) and the highest
 * stage-contract protocol it speaks. */
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

/* ---- Admission ledger ---------------------------------------------------------------- */

/* Physical memory pools ("device_ram", "vram", "wsl_quota") and what sessions reserved from
 * them. Thread-safe; must outlive every session opened with it. */
typedef struct OeLedger OeLedger;

/* pools_json: {"device_ram": bytes, ...}; NULL: this machine's available memory. */
OE_API OeError* oe_ledger_create(const char* pools_json, OeLedger** out_ledger);
OE_API void oe_ledger_free(OeLedger* ledger);
/* {"pools": {name: {capacity, reserved, quarantined, free}}, "reservations": [...]} */
OE_API OeError* oe_ledger_snapshot(const OeLedger* ledger, char** out_json);
/* An embedder's own memory (a server's connections and request bodies) in the same ledger as its
 * sessions: `bytes` of this machine's memory pool (device_ram; wsl_quota under WSL), all or
 * nothing (error "admission" with the numbers when it does not fit). Released by
 * oe_ledger_release. */
OE_API OeError* oe_ledger_reserve(OeLedger* ledger, const char* owner, int64_t bytes, int64_t* out_reservation);
OE_API void oe_ledger_release(OeLedger* ledger, int64_t reservation);
/* The budget a plan reserves per pool for `sessions` sessions, computed from its manifests
 * without loading anything: {"sessions", "stages": [{weights, state, loading_peak, ...}], "pools"}. */
OE_API OeError* oe_plan_budget(const char* plan_path, int sessions, char** out_json);

/* ---- Sessions: one handle for every plan (text, speech, omni, ...) -------------------- */

typedef struct OeSession OeSession;

typedef struct {
  const char* plan_path;  /* plan.json of an exported artifact */
  int allow_unqualified;  /* 1: run artifacts whose validation reports did not pass */
  int threads;            /* intra-op threads per backend; 0 = all cores */
  OeLedger* ledger;       /* optional: reserve the plan's budget before loading (error "admission"
                             if it does not fit); released when the session closes. With or
                             without it, a plan's own memory_budget_mb is enforced. */
} OeSessionConfig;

OE_API void oe_session_config_default(OeSessionConfig* config);
/* Verifies the artifacts (re-hash), admits the plan's memory budget, loads every stage and binds
 * its buffers. Any plan: its stages run on their own threads, connected by credited streams. */
OE_API OeError* oe_session_open(const OeSessionConfig* config, OeSession** out_session);
OE_API void oe_session_close(OeSession* session);

/* How a stream picks tokens (text tokens, or a talker's codes: the repetition penalty applies to
 * codebook 0 only). The default functions set use_plan_sampling = 1: the plan's sampling. */
typedef struct {
  int use_plan_sampling;          /* 1 (default): ignore the fields below */
  float temperature;              /* 0: greedy */
  int top_k;
  float top_p;
  float min_p;
  float repetition_penalty;
  uint64_t seed;
} OeSampling;

/* An image or audio item of a multimodal prompt: a file's bytes (PNG/JPEG/BMP/GIF; WAV), or,
 * when data is NULL, the path of the file. Copied during oe_session_submit. */
typedef struct {
  const char* kind;  /* "image" | "audio" */
  const void* data;
  size_t size;
  const char* path;  /* with data: only its name in reports; may be NULL */
} OeMedia;

/* One camera's image of an observation: a file's bytes, or, when data is NULL, its path. */
typedef struct {
  const char* camera;  /* the name the policy's plan gives it */
  const void* data;
  size_t size;
  const char* path;
} OeCameraImage;

/* What a policy plan acts on (copied during oe_session_submit / oe_session_post). */
typedef struct {
  double timestamp_ms;          /* capture time, ms since the Unix epoch; a policy refuses an observation
                                   without one, or older than its plan's max_observation_age_ms */
  const OeCameraImage* images;  /* per camera of the plan (any order): its current image, or for a plan
                                   with a frame history its whole history, oldest first */
  int n_images;
  const float* state;           /* zero-padded to the model's state dim */
  int n_state;
  const float* noise;           /* the flow's initial x_1, noise_rows x noise_cols (chunk x action dim),
                                   to compare with a reference; NULL: drawn from noise_seed */
  int noise_rows;
  int noise_cols;
  uint64_t noise_seed;
  int reset_history;            /* 1: a plan with a frame history starts it again (a new episode) */
} OeObservation;

/* One turn of a conversation given whole (an OpenAI-style message list). */
typedef struct {
  const char* role;     /* "system" (first only) | "user" | "assistant" */
  const char* content;
} OeChatMessage;

/* One request, whatever the plan: the entry stage's input and how each stream is generated.
 * Fields are only ever added at its end: fill it with oe_request_default (a caller built against
 * an older header must be rebuilt). */
typedef struct {
  const char* prompt;             /* text to answer (or, for a speech plan, to speak); the user
                                     message when chat = 1 */
  int chat;                       /* 1: format as a conversation in the plan's chat format (chatml, llama3) */
  const char* system_prompt;      /* chat only; may be NULL */
  const int32_t* prompt_ids;      /* exact token ids instead of prompt (n_prompt_ids > 0) */
  int n_prompt_ids;
  int continue_conversation;      /* 1: append to the resident context (multi-turn) */
  int max_new_tokens;             /* text stream; 0: the plan's default */
  OeSampling sampling;            /* text stream */
  const char* const* stop_strings;
  int n_stop_strings;
  int ignore_stop_tokens;         /* 1: always generate max_new_tokens */
  int max_frames;                 /* audio stream (12.5 frames per second of audio); 0: the plan's */
  OeSampling speech_sampling;     /* audio stream: the talker's codes */
  double prebuffer_ms;            /* audio the playback clock queues before it starts; -1 (default): the
                                     plan's (0 with an adaptive chunk schedule, 200 with a fixed one) */
  const OeMedia* media;           /* images and audio before the prompt, in this order (a multimodal
                                     plan's encoder stages read them); may be NULL */
  int n_media;
  const OeObservation* observation; /* a policy plan's input (prompt: its task text); may be NULL */
  double deadline_ms;             /* policy: the action is due this long after the capture (0: none);
                                     the action event reports deadline_missed and lateness_ms */
  const OeChatMessage* messages;  /* a whole conversation in the plan's chat format, ending with a user
                                     turn: instead of prompt, system_prompt and prompt_ids (copied) */
  int n_messages;
} OeRequest;

OE_API void oe_request_default(OeRequest* request);

/* One event of a request. Text events: {"kind": "token", "seq", "token_ids", "text"}; audio
 * events: {"kind": "pcm", "seq", "first_sample", "n_samples", "frames_final", "dtype"} with the
 * samples in `data`; each stream ends with a terminal {"kind": "done" | "cancelled" | "error",
 * "finish_reason", metrics...}. */
typedef struct {
  const char* stream;   /* "text" | "audio": the output type of the stage that made it */
  int64_t stage_id;
  const char* json;
  int terminal;         /* 1 for the last event of its stream */
  const void* data;     /* audio: n_samples samples of `dtype`, valid during the call; else NULL */
  int64_t n_samples;
  const char* dtype;    /* "float32" | "int16", or "" */
} OeEvent;

/* Return 0 to continue, non-zero to cancel the request (every stage stops at its next step). */
typedef int (*OeEventHandler)(const OeEvent* event, void* user_data);

/* Runs one request to the terminal event of every stream, on the calling thread: the handler
 * sees the events one at a time, in order per stream. */
OE_API OeError* oe_session_submit(OeSession* session, const OeRequest* request, OeEventHandler on_event,
                                  void* user_data);
/* A control loop's mailbox (policy plans): queues the request and returns at once. A request
 * still waiting when a newer one is posted is superseded: it never runs and its on_done gets the
 * error "superseded". Requests run one at a time on the session's queue thread, where on_event
 * and on_done are called; on_done is called exactly once per posted request, with NULL and the
 * terminal fields (JSON) of each stream, or with the error (owned by the callee: do not free it).
 * Do not call oe_session_submit on a session that has requests posted. */
typedef void (*OeDoneHandler)(const OeError* error, const char* terminals_json, void* user_data);
OE_API OeError* oe_session_post(OeSession* session, const OeRequest* request, OeEventHandler on_event,
                                OeDoneHandler on_done, void* user_data);
/* Thread-safe: the running request ends at every stage's next step; events still queued are
 * withheld, each stream ends with a "cancelled" event, the context keeps what was delivered. */
OE_API void oe_session_cancel(OeSession* session);
/* Thread-safe: fences the running request (its consumer is going away): queued events are
 * dropped, oe_session_submit returns the error "aborted", the next request starts a fresh
 * conversation at the next epoch. */
OE_API void oe_session_abort(OeSession* session);
/* Forgets the conversation and clears an error that poisoned the session. */
OE_API OeError* oe_session_reset(OeSession* session);
/* {"plan", "epoch", "streams": {"text": {...}, "audio": {"sample_rate", "pcm_dtype", ...}},
 *  "placements": [...], "stages": [{"stage_id", "family", "state", "last_request": {...}}]} */
OE_API OeError* oe_session_info(OeSession* session, char** out_json);
/* Tracing (off by default): while enabled, each request replaces the session's trace with its own.
 * The trace is Chrome trace event JSON (load it in ui.perfetto.dev): stage threads, worker steps,
 * graph runs with their device, engine and bytes copied, input waits, emits, the listener.
 * Not thread-safe against a running request: enable before submitting, read after it returned. */
OE_API OeError* oe_session_trace(OeSession* session, int enable);
OE_API OeError* oe_session_trace_json(OeSession* session, char** out_json);

/* ---- The server: the OpenAI and OpenPI protocols over HTTP, embedded ------------------ */

/* What `omni-edge-run serve` runs, in an app's own process (an Android app serving its plan to
 * the PC over `adb forward`, or to other apps on the phone). A library built without Boost.Beast
 * has no server: oe_server_start then fails with reason "unsupported". */
typedef struct OeServer OeServer;

typedef struct {
  const char* plan_path;
  const char* host;         /* the address to listen on; NULL: "127.0.0.1" (loopback only) */
  int port;                 /* 0: any free port (oe_server_url says which) */
  const char* api_key;      /* asked as Authorization: Bearer KEY; NULL or "": none */
  const char* model;        /* the id clients name; NULL: the plan's directory name */
  int max_sessions;         /* sessions opened at start; a request beyond them is answered 429 */
  int max_connections;      /* connections open at once (a thread each); one beyond is answered 429 */
  int threads;              /* intra-op threads per session's backends; 0 = all cores */
  int allow_unqualified;
  int64_t max_body_bytes;   /* a request body's limit (413 over it) */
  const char* memory_pools; /* the ledger's pools as JSON; NULL: this machine's available memory */
} OeServerConfig;

OE_API void oe_server_config_default(OeServerConfig* config);
/* Opens the plan's sessions and listens; serves on threads of its own from then on. Errors: the
 * plan's (its reason), "listen" (the address), "invalid_argument", "unsupported". */
OE_API OeError* oe_server_start(const OeServerConfig* config, OeServer** out_server);
/* "http://HOST:PORT/v1", the port as bound; valid until oe_server_stop. */
OE_API const char* oe_server_url(const OeServer* server);
/* Cancels running requests (each stream ends with its terminal chunk), shuts every connection,
 * stops listening and frees the handle; the sessions close when the last connection has ended. */
OE_API void oe_server_stop(OeServer* server);

/* ---- Voice activity: a plan's detector (Silero VAD) over a live input stream --------- */

/* The plan's `voice_activity` component (hashed, qualified unless allowed) over audio at
 * `sample_rate`, resampled to 16 kHz as it arrives; turn detection as OpenAI Realtime's
 * `server_vad` object (NULL or "": its defaults; unknown fields are refused by name). What a
 * realtime session runs on its input, for an app that wants the turns alone. */
typedef struct OeVoiceActivity OeVoiceActivity;
OE_API OeError* oe_vad_open(const char* plan_path, int sample_rate, const char* turn_detection_json,
                            int allow_unqualified, OeVoiceActivity** out_vad);
OE_API void oe_vad_close(OeVoiceActivity* vad);
/* Samples in [-1, 1]; *out_json: the turn changes they completed, as a JSON array of
 * {"kind": "speech_started", "audio_start_ms"} | {"kind": "speech_stopped", "audio_end_ms",
 * "speech_end_ms"} (milliseconds of the stream). */
OE_API OeError* oe_vad_push(OeVoiceActivity* vad, const float* samples, int64_t n, char** out_json);
/* {"processed_ms", "speaking", "turn_detection", "device", "engine"}, and with `probabilities`
 * every frame's speech probability so far (kept from open on only when asked: record = 1). */
OE_API OeError* oe_vad_info(OeVoiceActivity* vad, int probabilities, char** out_json);
OE_API void oe_vad_record(OeVoiceActivity* vad, int record);

/* ---- Realtime voice: a spoken conversation over an omni session --------------------- */

/* OpenAI Realtime's events over an open session of an omni plan (borrowed: it must outlive the
 * handle, and run nothing else meanwhile): client events in as JSON text, server events out
 * through `on_event` (from the caller's thread and from the response's own; one at a time, in
 * order; the text is valid during the call). Server VAD uses the plan's voice_activity component.
 * `options_json`: {"model": id, "allow_unqualified": bool, "max_turn_seconds": n} or NULL.
 * session.created is delivered before oe_realtime_open returns. */
typedef struct OeRealtime OeRealtime;
typedef void (*OeRealtimeHandler)(const char* event_json, void* user_data);
OE_API OeError* oe_realtime_open(OeSession* session, const char* options_json, OeRealtimeHandler on_event,
                                 void* user_data, OeRealtime** out_realtime);
/* One client event (session.update, input_audio_buffer.append/commit/clear, conversation.item.create /
 * truncate, response.create / cancel, playback.ack). A bad one is answered by an `error` event. */
OE_API void oe_realtime_send(OeRealtime* realtime, const char* event_json);
/* A microphone's samples without the base64 of input_audio_buffer.append (16-bit, the session's input rate). */
OE_API void oe_realtime_append_pcm16(OeRealtime* realtime, const int16_t* samples, int64_t n);
/* {"session", "items": [...], "context_tokens", "responses", "speaking", "responding", "last_timing"} */
OE_API OeError* oe_realtime_info(OeRealtime* realtime, char** out_json);
/* Cancels a response in flight (waiting for it) and frees the handle; no event is delivered after. */
OE_API void oe_realtime_close(OeRealtime* realtime);

/* ---- Deprecated in 0.3.0, removed in 0.4.0: per-kind wrappers over the session above --- */

typedef struct {
  const char* prompt;
  int chat;
  const char* system_prompt;
  const int32_t* prompt_ids;
  int n_prompt_ids;
  int continue_conversation;
  int max_new_tokens;
  OeSampling sampling;
  const char* const* stop_strings;
  int n_stop_strings;
  int ignore_stop_tokens;
} OeGenerateParams;

OE_API void oe_generate_params_default(OeGenerateParams* params);
typedef int (*OeEventCallback)(const char* event_json, void* user_data);
/* oe_session_submit's text events, as JSON. */
OE_API OeError* oe_session_generate(OeSession* session, const OeGenerateParams* params, OeEventCallback on_event,
                                    void* user_data);

typedef struct OeSpeech OeSpeech;
OE_API OeError* oe_speech_open(const OeSessionConfig* config, OeSpeech** out_speech);
OE_API void oe_speech_close(OeSpeech* speech);

typedef struct {
  const char* text;
  const int32_t* text_ids;
  int n_text_ids;
  int max_frames;
  OeSampling sampling;
  double prebuffer_ms;
} OeSpeakParams;

OE_API void oe_speak_params_default(OeSpeakParams* params);
typedef int (*OeSpeechCallback)(const char* event_json, const void* pcm, int64_t n_samples, void* user_data);
OE_API OeError* oe_speech_speak(OeSpeech* speech, const OeSpeakParams* params, OeSpeechCallback on_event,
                                void* user_data);
OE_API void oe_speech_cancel(OeSpeech* speech);
/* {"plan", "sample_rate", "pcm_dtype", "code_groups", "placements": [...], "codes": [[...], ...]} */
OE_API OeError* oe_speech_info(OeSpeech* speech, char** out_json);

typedef struct OeOmni OeOmni;
OE_API OeError* oe_omni_open(const OeSessionConfig* config, OeOmni** out_omni);
OE_API void oe_omni_close(OeOmni* omni);
OE_API OeError* oe_omni_run(OeOmni* omni, const OeGenerateParams* text, const OeSpeakParams* speech,
                            OeEventCallback on_text, OeSpeechCallback on_audio, void* user_data);
OE_API void oe_omni_cancel(OeOmni* omni);
OE_API OeError* oe_omni_info(OeOmni* omni, char** out_json);

#ifdef __cplusplus
}
#endif

#endif /* OMNI_EDGE_C_API_H_ */
