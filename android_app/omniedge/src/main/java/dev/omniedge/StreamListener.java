package dev.omniedge;

/**
 * Receives a request's output as it is made, on the engine's worker thread (never the caller's):
 * keep the work short and hand UI updates to the UI thread. An exception thrown here cancels the
 * request, and {@link Generation#await()} rethrows it as an {@link OmniEdgeException} with code
 * "listener".
 */
public interface StreamListener {
  /** One step of the text stream: the token ids it added and the text they completed. */
  default void onToken(TokenEvent token) {}

  /** A chunk of the audio stream: mono samples at {@link PcmChunk#sampleRate}. */
  default void onPcm(PcmChunk chunk) {}

  /** A policy plan's action chunk with its metadata (one per request, at its end). */
  default void onAction(ActionChunk action) {}
}
