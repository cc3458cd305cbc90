package dev.omniedge.app;

import android.media.AudioAttributes;
import android.media.AudioFormat;
import android.media.AudioTrack;
import dev.omniedge.PcmChunk;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;

/**
 * Plays an utterance's PCM as it streams in, through an AudioTrack in streaming mode, with the
 * native playback clock's rule: queue until {@code prebufferMs} of audio arrived (or the stream
 * ended), then play. Chunks come from the engine's worker thread and are written by this
 * player's own thread, so a full AudioTrack buffer never holds the engine back.
 */
final class PcmPlayer {
  private static final float[] END = new float[0];

  private final double prebufferMs;
  private final BlockingQueue<float[]> chunks = new LinkedBlockingQueue<>();
  private volatile boolean cancelled;
  private volatile int underrunsAtRelease = -1;
  private AudioTrack track;  // created at the first chunk, when the sample rate is known
  private Thread writer;

  PcmPlayer(double prebufferMs) {
    this.prebufferMs = prebufferMs;
  }

  /** From the listener: queue a chunk (the first one starts the writer). */
  synchronized void write(PcmChunk chunk) {
    if (cancelled) return;
    if (track == null) start(chunk.sampleRate);
    chunks.offer(chunk.toFloat());
  }

  /** The stream ended: play what is queued (even if shorter than the prebuffer), then stop. */
  void finish() {
    chunks.offer(END);
  }

  /** Stop at once and drop what is queued (cancel, leaving the app). */
  synchronized void cancel() {
    cancelled = true;
    chunks.clear();
    chunks.offer(END);
    if (track != null && underrunsAtRelease < 0) {  // not yet released by the writer
      track.pause();
      track.flush();
    }
  }

  /** Underruns the AudioTrack itself counted (the speaker starved), beside the native clock's. */
  synchronized int underruns() {
    if (underrunsAtRelease >= 0) return underrunsAtRelease;
    return track != null ? track.getUnderrunCount() : 0;
  }

  private void start(int sampleRate) {
    int min = AudioTrack.getMinBufferSize(sampleRate, AudioFormat.CHANNEL_OUT_MONO, AudioFormat.ENCODING_PCM_FLOAT);
    int prebufferBytes = (int) (sampleRate * prebufferMs / 1000.0) * 4;
    track = new AudioTrack.Builder()
        .setAudioAttributes(new AudioAttributes.Builder()
            .setUsage(AudioAttributes.USAGE_MEDIA)
            .setContentType(AudioAttributes.CONTENT_TYPE_SPEECH)
            .build())
        .setAudioFormat(new AudioFormat.Builder()
            .setEncoding(AudioFormat.ENCODING_PCM_FLOAT)
            .setSampleRate(sampleRate)
            .setChannelMask(AudioFormat.CHANNEL_OUT_MONO)
            .build())
        .setTransferMode(AudioTrack.MODE_STREAM)
        .setBufferSizeInBytes(Math.max(min, 2 * prebufferBytes))
        .build();
    final AudioTrack t = track;
    writer = new Thread(() -> writeLoop(t, sampleRate), "pcm-player");
    writer.start();
  }

  private void writeLoop(AudioTrack t, int sampleRate) {
    long queued = 0;
    boolean playing = false;
    try {
      while (true) {
        float[] samples = chunks.take();
        if (samples == END || cancelled) break;
        t.write(samples, 0, samples.length, AudioTrack.WRITE_BLOCKING);
        queued += samples.length;
        if (!playing && queued * 1000.0 / sampleRate >= prebufferMs) {
          t.play();
          playing = true;
        }
      }
      if (!cancelled) {
        if (!playing && queued > 0) t.play();
        t.stop();  // streaming mode: stops after the last written sample has played...
        long deadline = System.currentTimeMillis() + 1000 + queued * 1000 / sampleRate;
        while (!cancelled && (t.getPlaybackHeadPosition() & 0xFFFFFFFFL) < queued
            && System.currentTimeMillis() < deadline) {
          Thread.sleep(20);  // ...which release() below would cut short
        }
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } finally {
      synchronized (this) {
        if (cancelled) t.stop();
        underrunsAtRelease = t.getUnderrunCount();
        t.release();
      }
    }
  }
}
