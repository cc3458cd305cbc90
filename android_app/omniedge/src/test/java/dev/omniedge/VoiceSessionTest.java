package dev.omniedge;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNotNull;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.BeforeClass;
import org.junit.Test;

/**
 * dev.omniedge.VoiceSession in process on an omni plan that hears and speaks (the tiny Qwen2.5-Omni
 * thinker, a talker reading it, the vocoder, Silero VAD; android_app/host-test.sh makes it and the
 * espeak-ng speech): a spoken turn is found by the VAD and answered in speech; speaking over the
 * next reply cancels it and cuts it back to the 400 ms the app said it played (five frames: five
 * tokens kept).
 */
public class VoiceSessionTest {
  static String voicePlan;
  static short[] question, bargeIn;

  @BeforeClass
  public static void properties() throws Exception {
    OmniEdgeTest.properties();
    voicePlan = System.getProperty("omniedge.voicePlan");
    assertNotNull("run through android_app/host-test.sh (-Domniedge.voicePlan=...)", voicePlan);
    question = pcm(System.getProperty("omniedge.voiceQuestion"));
    bargeIn = pcm(System.getProperty("omniedge.voiceBargeIn"));
  }

  static short[] pcm(String path) throws Exception {
    ByteBuffer bytes = ByteBuffer.wrap(Files.readAllBytes(Paths.get(path))).order(ByteOrder.LITTLE_ENDIAN);
    short[] out = new short[bytes.remaining() / 2];
    bytes.asShortBuffer().get(out);
    return out;
  }

  /** The microphone: 20 ms at a time, as AudioRecord hands them over. */
  static void speak(VoiceSession voice, short[] pcm) {
    for (int at = 0; at < pcm.length; at += 480) voice.appendPcm16(pcm, at, Math.min(480, pcm.length - at));
  }

  static final class Events implements VoiceSession.Listener {
    final LinkedBlockingQueue<Map<String, Object>> queue = new LinkedBlockingQueue<>();
    final List<String> seen = new ArrayList<>();

    @Override
    public void onEvent(String eventJson) {
      queue.add(Json.parseObject(eventJson));
    }

    Map<String, Object> next(String type) throws InterruptedException {
      while (true) {
        Map<String, Object> e = queue.poll(120, TimeUnit.SECONDS);
        assertNotNull("no " + type + " after " + seen, e);
        seen.add(Json.getString(e, "type", ""));
        if (type.equals(Json.getString(e, "type", ""))) return e;
      }
    }
  }

  @SuppressWarnings("unchecked")
  @Test(timeout = 600_000)
  public void aSpokenTurnIsAnsweredAndABargeInKeepsWhatWasPlayed() throws Exception {
    Events events = new Events();
    try (OmniEdge engine = OmniEdge.open(new OmniEdge.Config(voicePlan).threads(1))) {
      VoiceSession voice = VoiceSession.open(engine, events);
      assertEquals("session.created", Json.getString(events.queue.take(), "type", ""));
      voice.send("{\"type\": \"session.update\", \"session\": {\"max_output_tokens\": 16}}");
      events.next("session.updated");
      speak(voice, question);
      events.next("input_audio_buffer.speech_started");
      events.next("input_audio_buffer.committed");
      events.next("response.created");
      Map<String, Object> delta = events.next("response.output_audio.delta");
      assertTrue(VoiceSession.pcmOf(Json.getString(delta, "delta", "")).length > 0);
      Map<String, Object> done = events.next("response.done");
      assertEquals("incomplete", Json.getString((Map<String, Object>) done.get("response"), "status", ""));

      voice.send("{\"type\": \"session.update\", \"session\": {\"max_output_tokens\": 64}}");
      events.next("session.updated");
      speak(voice, question);
      Map<String, Object> first = events.next("response.output_audio.delta");
      long received = 0;
      while (received < 24_000 * 600 / 1000) {  // 600 ms of the reply
        received += VoiceSession.pcmOf(Json.getString(first, "delta", "")).length;
        if (received < 24_000 * 600 / 1000) first = events.next("response.output_audio.delta");
      }
      voice.playbackAck(Json.getString(first, "item_id", ""), 400);
      speak(voice, bargeIn);
      events.next("input_audio_buffer.speech_started");
      Map<String, Object> cancelled = (Map<String, Object>) events.next("response.done").get("response");
      assertEquals("cancelled", Json.getString(cancelled, "status", ""));
      Map<String, Object> cut = events.next("conversation.item.truncated");
      assertEquals(400, Json.getLong(cut, "audio_end_ms", -1));
      assertEquals(5, Json.getLong(cut, "kept_tokens", -1));
      assertEquals("frame", Json.getString(cut, "alignment", ""));
      events.next("response.done");  // the barge-in turn's own reply
      Map<String, Object> info = Json.parseObject(voice.info());
      assertTrue(voice.info(), Json.getLong(info, "context_tokens", 0) > 0);
      voice.close();
      assertThrows(IllegalStateException.class, () -> voice.send("{\"type\": \"response.cancel\"}"));
    }
  }

  @Test(timeout = 300_000)
  public void closingTheEngineEndsItsConversationFirst() throws Exception {
    Events events = new Events();
    VoiceSession voice;
    try (OmniEdge engine = OmniEdge.open(new OmniEdge.Config(voicePlan).threads(1))) {
      voice = VoiceSession.open(engine, events);
      speak(voice, question);
      events.next("response.output_audio.delta");  // a reply in flight when the engine goes
    }
    final VoiceSession closed = voice;
    assertThrows(IllegalStateException.class, () -> closed.appendPcm16(question, 0, 480));
  }
}
