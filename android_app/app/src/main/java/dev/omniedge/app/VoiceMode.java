package dev.omniedge.app;

import android.media.AudioAttributes;
import android.media.AudioFormat;
import android.media.AudioRecord;
import android.media.AudioTrack;
import android.media.MediaRecorder;
import android.media.audiofx.AcousticEchoCanceler;
import android.util.Log;
import dev.omniedge.OmniEdge;
import dev.omniedge.VoiceSession;
import java.util.function.Consumer;
import org.json.JSONException;
import org.json.JSONObject;

/**
 * The app's voice mode: a spoken conversation with the loaded omni plan in process
 * ({@link VoiceSession}). The microphone is an AudioRecord on the VOICE_COMMUNICATION source with
 * the platform's acoustic echo canceller (the phone's own speech must not barge in on itself),
 * 24 kHz mono 16-bit, 20 ms at a time; replies play on a streaming AudioTrack whose playback head
 * says what was heard ({@code playback.ack} every 100 ms); the server VAD's speech_started flushes
 * the track at once, and the session cuts the reply back to the acknowledged position.
 */
final class VoiceMode implements VoiceSession.Listener {
  private static final String TAG = "omni-edge-voice";
  private static final int RATE = 24_000;
  private static final int CHUNK = RATE / 50;  // 20 ms

  private final VoiceSession session;
  private final Consumer<String> show;  // transcript lines, on any thread (the activity posts them)
  private final AudioRecord mic;
  private final AudioTrack track;
  private final Thread recorder;
  private volatile boolean running = true;
  private volatile String playingItem;
  private volatile long itemStartFrames;  // the track's head when the item's first delta was written

  VoiceMode(OmniEdge engine, Consumer<String> show) {
    this.show = show;
    int minIn = AudioRecord.getMinBufferSize(RATE, AudioFormat.CHANNEL_IN_MONO, AudioFormat.ENCODING_PCM_16BIT);
    mic = new AudioRecord(MediaRecorder.AudioSource.VOICE_COMMUNICATION, RATE, AudioFormat.CHANNEL_IN_MONO,
        AudioFormat.ENCODING_PCM_16BIT, Math.max(minIn, CHUNK * 8));
    if (AcousticEchoCanceler.isAvailable()) {
      AcousticEchoCanceler aec = AcousticEchoCanceler.create(mic.getAudioSessionId());
      if (aec != null) aec.setEnabled(true);
    } else {
      Log.w(TAG, "no acoustic echo canceller on this device: use headphones, or the reply will barge in on itself");
    }
    int minOut = AudioTrack.getMinBufferSize(RATE, AudioFormat.CHANNEL_OUT_MONO, AudioFormat.ENCODING_PCM_16BIT);
    track = new AudioTrack.Builder()
        .setAudioAttributes(new AudioAttributes.Builder().setUsage(AudioAttributes.USAGE_VOICE_COMMUNICATION)
            .setContentType(AudioAttributes.CONTENT_TYPE_SPEECH).build())
        .setAudioFormat(new AudioFormat.Builder().setSampleRate(RATE).setChannelMask(AudioFormat.CHANNEL_OUT_MONO)
            .setEncoding(AudioFormat.ENCODING_PCM_16BIT).build())
        .setTransferMode(AudioTrack.MODE_STREAM).setBufferSizeInBytes(Math.max(minOut, RATE * 2 * 30)).build();
    session = VoiceSession.open(engine, this);
    track.play();
    mic.startRecording();
    recorder = new Thread(this::record, "omni-edge-mic");
    recorder.start();
  }

  private void record() {
    short[] buffer = new short[CHUNK];
    long lastAck = 0;
    while (running) {
      int n = mic.read(buffer, 0, buffer.length);
      if (n > 0) session.appendPcm16(buffer, 0, n);
      long now = System.nanoTime();
      if (playingItem != null && now - lastAck > 100_000_000L) {
        session.playbackAck(playingItem, playedMs());
        lastAck = now;
      }
    }
  }

  private long playedMs() {
    long frames = (track.getPlaybackHeadPosition() & 0xffffffffL) - itemStartFrames;
    return Math.max(0, frames * 1000 / RATE);
  }

  @Override
  public void onEvent(String eventJson) {
    try {
      JSONObject e = new JSONObject(eventJson);
      switch (e.getString("type")) {
        case "input_audio_buffer.speech_started":  // barge-in: what was not played never will be
          if (playingItem != null) session.playbackAck(playingItem, playedMs());
          track.pause();
          track.flush();
          track.play();
          playingItem = null;
          break;
        case "response.output_audio.delta":
          if (!e.getString("item_id").equals(playingItem)) {
            playingItem = e.getString("item_id");
            itemStartFrames = track.getPlaybackHeadPosition() & 0xffffffffL;
          }
          short[] pcm = VoiceSession.pcmOf(e.getString("delta"));
          track.write(pcm, 0, pcm.length, AudioTrack.WRITE_NON_BLOCKING);
          break;
        case "response.output_audio_transcript.delta":
          show.accept(e.getString("delta"));
          break;
        case "response.done":
          show.accept("\n[" + e.getJSONObject("response").getString("status") + "]\n");
          break;
        case "error":
          show.accept("\n[error: " + e.getJSONObject("error").optString("message") + "]\n");
          break;
        default:
          break;
      }
    } catch (JSONException ex) {
      Log.w(TAG, "unreadable event: " + ex);
    }
  }

  /** Stops the microphone and playback and ends the conversation (a reply in flight is cancelled). */
  void close() {
    running = false;
    mic.stop();
    try {
      recorder.join(1000);
    } catch (InterruptedException ex) {
      Thread.currentThread().interrupt();
    }
    session.close();
    mic.release();
    track.release();
  }
}
