package dev.omniedge;

/**
 * The JNI functions of libomniedge_jni (controller_cpp/jni/), over the controller's C ABI. A
 * handle is one native engine: a session plus its worker thread, which loads the plan, runs the
 * queued requests and calls back into {@link Generation}.
 */
final class NativeBridge {
  static {
    System.loadLibrary("omniedge_jni");
  }

  private NativeBridge() {}

  static native String version();

  /** Starts the worker, which opens the plan; returns at once. */
  static native long create(String planPath, boolean allowUnqualified, int threads);

  /** Blocks until the plan is loaded; throws {@link OmniEdgeException} if it could not be. */
  static native void awaitOpen(long handle);

  /** oe_session_info's JSON (the plan must be loaded). */
  static native String info(long handle);

  /** Queues a request; its events and its end go to {@code generation} on the worker thread. */
  static native void submit(long handle, Request request, Generation generation);

  /** Ends the running request and every queued one; from any thread. */
  static native void cancel(long handle);

  /** Cancels, waits for the worker (and a load in progress), closes the session, frees the handle. */
  static native void close(long handle);

  /** oe_realtime_open over the engine's session; events go to {@code listener} (VoiceSession.Listener). */
  static native long voiceOpen(long engine, String optionsJson, Object listener);

  /** oe_realtime_send: one client event. */
  static native void voiceSend(long voice, String eventJson);

  /** oe_realtime_append_pcm16: microphone samples at the session's input rate. */
  static native void voiceAppend(long voice, short[] pcm, int offset, int length);

  /** oe_realtime_info. */
  static native String voiceInfo(long voice);

  /** oe_realtime_close: cancels a response in flight and frees the handle. */
  static native void voiceClose(long voice);

  /** oe_server_start: opens the plan's sessions and listens; throws {@link OmniEdgeException}. */
  static native long serverStart(String planPath, String host, int port, String apiKey, int maxSessions, int threads);

  /** oe_server_url. */
  static native String serverUrl(long server);

  /** oe_server_stop: ends the streams, closes the connections, frees the handle. */
  static native void serverStop(long server);
}
