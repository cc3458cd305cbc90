package dev.omniedge;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNotNull;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Stream;
import org.junit.BeforeClass;
import org.junit.Test;

/**
 * The bridge and the API on the real default artifacts (android_app/host-test.sh sets the
 * properties): the same plan and prompt give what the native CLI gives.
 */
public class OmniEdgeTest {
  // Accents and an emoji: the prompt crosses JNI as UTF-16 and must reach the tokenizer as the CLI's UTF-8.
  static final String PROMPT = "Tell me about caf\u00e9s \ud83d\ude00 in a few words.";
  static String textPlan;
  static String omniPlan;
  static String mediaPlan, image, audio;  // a multimodal plan (image + audio encoders, thinker) and its media
  static String cli;
  static String policyPlan;  // a π0 policy plan with obs.json, its images, noise.npy and noise.f32 beside it
  static Path scratch;

  @BeforeClass
  public static void properties() throws IOException {
    textPlan = System.getProperty("omniedge.textPlan");
    omniPlan = System.getProperty("omniedge.omniPlan");
    cli = System.getProperty("omniedge.cli");
    mediaPlan = System.getProperty("omniedge.mediaPlan");
    image = System.getProperty("omniedge.image");
    audio = System.getProperty("omniedge.audio");
    policyPlan = System.getProperty("omniedge.policyPlan");
    assertNotNull("run through android_app/host-test.sh (-Domniedge.textPlan=...)", textPlan);
    scratch = Files.createTempDirectory("omniedge-junit");
  }

  /** Runs omni-edge-run with --json and returns its stdout lines. */
  static List<String> runCli(String... args) throws IOException, InterruptedException {
    List<String> command = new ArrayList<>();
    command.add(cli);
    for (String a : args) command.add(a);
    command.add("--json");
    Process p = new ProcessBuilder(command).redirectError(ProcessBuilder.Redirect.INHERIT).start();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertTrue("omni-edge-run did not finish", p.waitFor(300, TimeUnit.SECONDS));
    assertEquals("omni-edge-run " + command + " exit", 0, p.exitValue());
    return out.lines().collect(java.util.stream.Collectors.toList());
  }

  static int[] cliTokenIds(List<String> lines) {
    List<Integer> ids = new ArrayList<>();
    for (String line : lines) {
      java.util.Map<String, Object> e = Json.parseObject(line);
      if (!"token".equals(e.get("kind")) || (e.containsKey("stream") && !"text".equals(e.get("stream")))) continue;
      for (Object id : Json.getList(e, "token_ids")) ids.add(((Number) id).intValue());
    }
    return ids.stream().mapToInt(Integer::intValue).toArray();
  }

  static final class Collector implements StreamListener {
    final List<Integer> ids = new ArrayList<>();
    final StringBuilder text = new StringBuilder();
    final AtomicLong samples = new AtomicLong();
    final List<Long> firstSamples = new ArrayList<>();

    @Override
    public void onToken(TokenEvent t) {
      for (int id : t.tokenIds()) ids.add(id);
      text.append(t.text);
    }

    @Override
    public void onPcm(PcmChunk c) {
      assertEquals("chunks arrive in order, without gaps", samples.get(), c.firstSample);
      assertTrue(c.sampleRate > 0);
      firstSamples.add(c.firstSample);
      samples.addAndGet(c.size());
    }

    int[] idArray() {
      return ids.stream().mapToInt(Integer::intValue).toArray();
    }
  }

  @Test
  public void imageAndAudioBytesGiveTheCliIdsForTheSameFiles() throws Exception {
    assertNotNull("-Domniedge.mediaPlan", mediaPlan);
    int[] expected = cliTokenIds(runCli("--plan", mediaPlan, "--image", image, "--audio", audio, "--prompt", "What is it?",
                                        "--chat", "--max-new-tokens", "12", "--ignore-stop-tokens"));
    assertEquals(12, expected.length);
    try (OmniEdge engine = OmniEdge.open(mediaPlan)) {
      Collector c = new Collector();
      Request request = Request.builder("What is it?").chat(null).maxNewTokens(12).ignoreStopTokens()
          .image(Files.readAllBytes(Paths.get(image))).audio(Files.readAllBytes(Paths.get(audio))).build();
      engine.generate(request, c);
      assertArrayEquals(expected, c.idArray());
      try {  // not an image: the encoder's error, and the engine goes on
        engine.generate(Request.builder("x").image(new byte[] {1, 2, 3}).build(), new Collector());
        fail("a non-image was accepted");
      } catch (OmniEdgeException e) {
        assertTrue(e.getMessage(), e.getMessage().contains("not an image"));
      }
      Collector again = new Collector();
      engine.generate(request, again);
      assertArrayEquals(expected, again.idArray());
    }
  }

  @Test
  public void policyActionsFromImageBytesEqualTheCli() throws Exception {
    assertNotNull("-Domniedge.policyPlan", policyPlan);
    Path dir = Paths.get(policyPlan).getParent();
    List<String> lines = runCli("act", "--plan", policyPlan, "--observation", dir.resolve("obs.json").toString(), "--noise",
                                dir.resolve("noise.npy").toString(), "--capture-age-ms", "0");
    java.util.Map<String, Object> expected = Json.parseObject(lines.get(lines.size() - 1));
    assertEquals("action", Json.getString(expected, "kind", ""));
    java.nio.ByteBuffer raw = java.nio.ByteBuffer.wrap(Files.readAllBytes(dir.resolve("noise.f32")))
        .order(java.nio.ByteOrder.LITTLE_ENDIAN);
    float[] noise = new float[raw.remaining() / 4];
    raw.asFloatBuffer().get(noise);
    List<ActionChunk> chunks = new ArrayList<>();
    StreamListener listener = new StreamListener() {
      @Override
      public void onAction(ActionChunk a) {
        chunks.add(a);
      }
    };
    try (OmniEdge engine = OmniEdge.open(policyPlan)) {
      Request request = Request.builder("pick up the red block").observation(System.currentTimeMillis())
          .camera("left_wrist_0_rgb", Files.readAllBytes(dir.resolve("left_wrist_0_rgb.png")))
          .camera("base_0_rgb", Files.readAllBytes(dir.resolve("base_0_rgb.png")))
          .state(new float[] {0.25f, -0.5f, 1.0f}).noise(noise, 10, 8).deadlineMs(60_000).build();
      engine.generate(request, listener);
      assertEquals(1, chunks.size());
      ActionChunk a = chunks.get(0);
      List<Object> rows = Json.getList(expected, "actions");
      assertEquals(rows.size(), a.chunkSize());
      for (int k = 0; k < a.chunkSize(); ++k) {
        @SuppressWarnings("unchecked")
        List<Object> row = (List<Object>) rows.get(k);
        float[] want = new float[row.size()];
        for (int i = 0; i < want.length; ++i) want[i] = ((Number) row.get(i)).floatValue();
        assertArrayEquals(want, a.action(k), 0f);
      }
      assertEquals(8, a.names.size());
      assertFalse(a.deadlineMissed);
      assertTrue(a.ageAtEmissionMs >= a.ageAtStartMs);
      assertEquals(a.observationTimestampMs + 20.0, a.targetTimeMs(1), 1e-6);
      try {  // an observation from the distant past: refused as stale, and the engine goes on
        engine.generate(Request.builder("x").observation(1000.0).camera("base_0_rgb", new byte[] {1}).build(), listener);
        fail("a stale observation was accepted");
      } catch (OmniEdgeException e) {
        assertEquals("stale_observation", e.code());
      }
      assertEquals(1, chunks.size());
    }
  }

  @Test
  public void streamedTokenIdsEqualTheNativeCli() throws Exception {
    int[] expected = cliTokenIds(runCli("--plan", textPlan, "--prompt", PROMPT, "--chat", "--max-new-tokens", "24"));
    assertTrue(expected.length > 0);
    try (OmniEdge engine = OmniEdge.open(textPlan)) {
      Collector c = new Collector();
      Result r = engine.generate(Request.builder(PROMPT).chat(null).maxNewTokens(24).build(), c);
      assertArrayEquals(expected, c.idArray());
      assertArrayEquals(expected, r.tokenIds());
      assertEquals(c.text.toString(), r.text);
      assertFalse(r.cancelled());
      assertTrue(r.metrics.ttftMs > 0 && r.metrics.generatedTokens == expected.length);
      assertFalse(engine.placements().isEmpty());
      for (Placement p : engine.placements()) assertEquals("cpu", p.device);  // honest: this host has no NPU
      assertTrue(r.metrics.toString(), r.metrics.toString().startsWith("TTFT "));
    }
  }

  @Test
  public void anOmniRequestDeliversTheSamplesOfTheNativeWav() throws Exception {
    Path wav = scratch.resolve("cli.wav");
    List<String> lines = runCli("--plan", omniPlan, "--prompt", PROMPT, "--max-new-tokens", "12", "--ignore-stop-tokens",
        "--speak", wav.toString(), "--max-frames", "20");
    long wavSamples = wavSampleCount(wav);
    assertTrue(wavSamples > 0);
    try (OmniEdge engine = OmniEdge.open(omniPlan)) {
      Collector c = new Collector();
      Result r = engine.generate(Request.builder(PROMPT).maxNewTokens(12).ignoreStopTokens().maxFrames(20).build(), c);
      assertEquals(wavSamples, c.samples.get());
      assertEquals(wavSamples, r.samples);
      assertArrayEquals(cliTokenIds(lines), r.tokenIds());
      assertTrue(r.finishReasons.toString(), r.finishReasons.containsKey("audio") && r.finishReasons.containsKey("text"));
      assertTrue(r.metrics.firstPcmMs > 0 && r.metrics.rtf > 0 && r.metrics.underruns >= 0);
      assertEquals(0.0, engine.planPrebufferMs(), 0.0);  // export tts's adaptive schedule: play from the first PCM
      assertTrue(r.metrics.stageDevices(), r.metrics.stageDevices().startsWith("0:CPU 1:CPU 2:CPU"));
    }
  }

  /** Samples in a PCM WAV: the data chunk's size over the bytes per sample. */
  static long wavSampleCount(Path wav) throws IOException {
    byte[] b = Files.readAllBytes(wav);
    java.nio.ByteBuffer buf = java.nio.ByteBuffer.wrap(b).order(java.nio.ByteOrder.LITTLE_ENDIAN);
    int bits = 16;
    for (int pos = 12; pos + 8 <= b.length;) {
      String id = new String(b, pos, 4, StandardCharsets.US_ASCII);
      int size = buf.getInt(pos + 4);
      if (id.equals("fmt ")) bits = buf.getShort(pos + 22);
      if (id.equals("data")) return size / (bits / 8);
      pos += 8 + size + (size & 1);
    }
    throw new AssertionError("no data chunk in " + wav);
  }

  @Test
  public void cancelMidStreamEndsCancelledAndTheSessionGoesOn() throws Exception {
    try (OmniEdge engine = OmniEdge.open(textPlan)) {
      AtomicInteger seen = new AtomicInteger();
      Thread[] canceller = new Thread[1];
      Result r = engine.generate(Request.builder(PROMPT).maxNewTokens(400).ignoreStopTokens().build(), new StreamListener() {
        @Override
        public void onToken(TokenEvent t) {
          if (seen.incrementAndGet() == 3) {  // from another thread, as a UI's button would
            canceller[0] = new Thread(engine::cancel);
            canceller[0].start();
          }
        }
      });
      canceller[0].join();
      assertTrue(r.finishReasons.toString(), r.cancelled());
      assertEquals("cancelled", r.finishReasons.get("text"));
      assertTrue(r.tokenIds().length >= 3 && r.tokenIds().length < 400);
      // Usable afterwards: a fresh request gives what a fresh engine gives.
      int[] expected = cliTokenIds(runCli("--plan", textPlan, "--prompt", PROMPT, "--chat", "--max-new-tokens", "8"));
      Result again = engine.generate(Request.builder(PROMPT).chat(null).maxNewTokens(8).build(), null);
      assertArrayEquals(expected, again.tokenIds());
    }
  }

  @Test
  public void aBadPlanRaisesTheCodeAndMessage() {
    OmniEdgeException missing = assertThrows(OmniEdgeException.class, () -> OmniEdge.open("/nonexistent/plan.json"));
    assertEquals("file_missing", missing.code());
    assertTrue(missing.getMessage().contains("/nonexistent/plan.json"));
    OmniEdgeException malformed = assertThrows(OmniEdgeException.class, () -> {
      Path plan = scratch.resolve("malformed.json");
      Files.write(plan, "{\"stages\": 5".getBytes(StandardCharsets.UTF_8));
      OmniEdge.open(plan.toString());
    });
    assertFalse(malformed.code().isEmpty());
  }

  @Test
  public void aTamperedArtifactRaisesHashMismatch() throws Exception {
    Path src = Paths.get(textPlan).getParent();
    Path copy = scratch.resolve("tampered");
    copyTree(src, copy);
    Path victim;
    try (Stream<Path> files = Files.walk(copy.resolve("thinker-onnx"))) {
      victim = files.filter(p -> p.toString().endsWith(".onnx") || p.toString().endsWith(".bin")).findFirst().get();
    }
    try (RandomAccessFile f = new RandomAccessFile(victim.toFile(), "rw")) {
      f.seek(f.length() / 2);
      int b = f.read();
      f.seek(f.length() / 2);
      f.write(b ^ 0xFF);
    }
    OmniEdgeException e = assertThrows(OmniEdgeException.class,
        () -> OmniEdge.open(copy.resolve("plan.onnx.json").toString()));
    assertEquals(e.getMessage(), "hash_mismatch", e.code());
  }

  static void copyTree(Path src, Path dst) throws IOException {
    try (Stream<Path> files = Files.walk(src)) {
      for (Path p : (Iterable<Path>) files::iterator) {
        Path to = dst.resolve(src.relativize(p).toString());
        if (Files.isDirectory(p)) {
          Files.createDirectories(to);
        } else {
          Files.copy(p, to);
        }
      }
    }
  }

  @Test
  public void cancelAndCloseDuringLoadDoNotCrash() throws Exception {
    for (int i = 0; i < 5; i++) {
      OmniEdge engine = OmniEdge.openAsync(new OmniEdge.Config(textPlan));
      Generation g = engine.submit(Request.builder(PROMPT).maxNewTokens(50).build(), null);
      engine.cancel();  // the load goes on; the queued request ends cancelled
      if (i % 2 == 0) engine.close();  // waits for the load, then frees everything
      Result r = g.await(120, TimeUnit.SECONDS);
      assertNotNull("the request never ended", r);
      assertTrue(r.finishReasons.toString(), r.cancelled());
      engine.close();
      engine.close();  // idempotent
      assertThrows(IllegalStateException.class, () -> engine.submit(Request.builder("x").build(), null));
    }
  }

  @Test
  @SuppressWarnings("try")  // close() inside the try block is the point: it must be refused there
  public void aListenerThatThrowsEndsTheRequestWithItsError() throws Exception {
    try (OmniEdge engine = OmniEdge.open(textPlan)) {
      Generation g = engine.submit(Request.builder(PROMPT).maxNewTokens(50).ignoreStopTokens().build(),
          new StreamListener() {
            @Override
            public void onToken(TokenEvent t) {
              throw new IllegalStateException("listener bug");
            }
          });
      OmniEdgeException e = assertThrows(OmniEdgeException.class, g::await);
      assertEquals("listener", e.code());
      assertTrue(e.getCause() instanceof IllegalStateException);
      List<IllegalStateException> refused = new ArrayList<>();
      // Stop tokens ignored: on another host's checkpoint the first token may be end-of-text,
      // which is not streamed, and the listener would never run.
      engine.generate(Request.builder(PROMPT).maxNewTokens(2).ignoreStopTokens().build(), new StreamListener() {
        @Override
        public void onToken(TokenEvent t) {
          try {
            engine.close();
          } catch (IllegalStateException expected) {
            refused.add(expected);
          }
        }
      });
      assertFalse(refused.isEmpty());
      assertThrows(IllegalArgumentException.class, () -> Request.builder("a\u0000b"));
    }
  }

  /** cancel() from a listener while another thread closes the engine: neither waits for the other
   * (a deadlock here hangs, so the timeout is the failure). */
  @Test(timeout = 120_000)
  public void aListenersCancelDoesNotWaitForClose() throws Exception {
    OmniEdge engine = OmniEdge.open(textPlan);
    java.util.concurrent.CountDownLatch closing = new java.util.concurrent.CountDownLatch(1);
    Thread closer = new Thread(() -> {
      try {
        closing.await();
      } catch (InterruptedException interrupted) {
        return;
      }
      engine.close();
    });
    closer.start();
    Result stopped = engine.generate(Request.builder(PROMPT).maxNewTokens(200).ignoreStopTokens().build(),
        new StreamListener() {
          @Override
          public void onToken(TokenEvent t) {
            closing.countDown();
            try {
              Thread.sleep(50);  // let close() queue for the lock first
            } catch (InterruptedException interrupted) {
              Thread.currentThread().interrupt();
            }
            engine.cancel();
          }
        });
    closer.join();
    assertTrue(stopped.cancelled());
  }

  static long rssKb() throws IOException {
    for (String line : Files.readAllLines(Paths.get("/proc/self/status"))) {
      if (line.startsWith("VmRSS:")) return Long.parseLong(line.replaceAll("[^0-9]", ""));
    }
    fail("no VmRSS");
    return 0;
  }

  @Test
  public void twoHundredCyclesLeakNothing() throws Exception {
    int cycles = Integer.getInteger("omniedge.cycles", 200);
    long[] rss = new long[cycles];
    int[] first = null;
    for (int i = 0; i < cycles; i++) {
      try (OmniEdge engine = OmniEdge.open(new OmniEdge.Config(textPlan).threads(1))) {
        Result r = engine.generate(Request.builder(PROMPT).maxNewTokens(4).build(), new Collector());
        if (first == null) first = r.tokenIds();
        assertArrayEquals("cycle " + i, first, r.tokenIds());
      }
      rss[i] = rssKb();
    }
    // After warm-up (allocator pools, JIT), resident memory stays flat: a leak of one session
    // (its weights and KV cache, several MB) per cycle would add hundreds of MB.
    long warm = rss[Math.min(19, cycles - 1)], last = rss[cycles - 1];
    System.out.printf("RSS after cycle 20: %d MB, after %d: %d MB%n", warm / 1024, cycles, last / 1024);
    assertTrue("RSS grew from " + warm / 1024 + " MB to " + last / 1024 + " MB", last - warm < 48 * 1024);
  }
}
