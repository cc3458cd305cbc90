package dev.omniedge;

import java.util.Base64;

/**
 * A spoken conversation with an omni plan, in process: OpenAI Realtime's events over the engine's
 * session (the C ABI's oe_realtime_*), as the server's /v1/realtime has them. The app feeds the
 * microphone ({@link #appendPcm16}: 16-bit mono at 24 kHz, from AudioRecord on a
 * VOICE_COMMUNICATION source with the platform's echo canceller), plays each
 * {@code response.output_audio.delta} ({@link #pcmOf}) on an AudioTrack, tells what it played
 * ({@link #playbackAck}), and flushes playback when the listener sees
 * {@code input_audio_buffer.speech_started}: the server's VAD heard the user over the reply, which
 * is cancelled and cut back to what was played. Events arrive on native threads (the caller's for
 * what it sent, a response's own for its stream): hand them to the UI thread.
 */
public final class VoiceSession implements AutoCloseable {
  /** One server event as JSON ({"type": ..., ...}). */
  public interface Listener {
    void onEvent(String eventJson);
  }

  private final Object lock = new Object();
  private final OmniEdge engine;
  private long handle;

  private VoiceSession(OmniEdge engine) {
    this.engine = engine;
  }

  /**
   * Opens a conversation over {@code engine} (an omni plan that hears, loaded; it runs nothing
   * else until this is closed). {@code session.created} reaches the listener before this returns.
   */
  public static VoiceSession open(OmniEdge engine, Listener listener) {
    VoiceSession session = new VoiceSession(engine);
    synchronized (session.lock) {
      try {
        session.handle = NativeBridge.voiceOpen(engine.handleForVoice(session), null, listener);
      } finally {
        if (session.handle == 0) engine.voiceClosed(session);
      }
    }
    return session;
  }

  /** One client event as JSON (session.update, response.create, response.cancel, ...); errors come back as events. */
  public void send(String eventJson) {
    synchronized (lock) {
      NativeBridge.voiceSend(live(), eventJson);
    }
  }

  /** Microphone samples, 16-bit mono at the session's input rate (24 kHz unless session.update said otherwise). */
  public void appendPcm16(short[] pcm, int offset, int length) {
    synchronized (lock) {
      NativeBridge.voiceAppend(live(), pcm, offset, length);
    }
  }

  /** How much of a reply's audio was played (vLLM-Omni's playback.ack): what a barge-in keeps. */
  public void playbackAck(String itemId, long playedMs) {
    send("{\"type\": \"playback.ack\", \"item_id\": " + Json.quote(itemId) + ", \"played_ms\": " + playedMs + "}");
  }

  /** The conversation as the session holds it: items, the thinker's context length, the last timing. */
  public String info() {
    synchronized (lock) {
      return NativeBridge.voiceInfo(live());
    }
  }

  /** The samples of a {@code response.output_audio.delta}'s base64 PCM16. */
  public static short[] pcmOf(String base64) {
    byte[] bytes = Base64.getDecoder().decode(base64);
    short[] out = new short[bytes.length / 2];
    for (int i = 0; i < out.length; i++) out[i] = (short) ((bytes[2 * i] & 0xff) | (bytes[2 * i + 1] << 8));
    return out;
  }

  /** Cancels a response in flight and frees the session; no event after it. Idempotent; closing the engine closes it. */
  @Override
  public void close() {
    synchronized (lock) {
      if (handle != 0) NativeBridge.voiceClose(handle);
      handle = 0;
    }
    engine.voiceClosed(this);
  }

  private long live() {
    if (handle == 0) throw new IllegalStateException("the voice session is closed");
    return handle;
  }
}
