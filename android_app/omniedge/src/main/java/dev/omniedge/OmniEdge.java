package dev.omniedge;

import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.locks.ReentrantReadWriteLock;

/**
 * One loaded plan (text, speech or omni) on the controller: requests run one at a time on the
 * engine's own worker thread, in the order submitted; their events reach a {@link StreamListener}
 * there. Thread-safe. Close it (try-with-resources) to stop the worker and free the session.
 *
 * <pre>{@code
 * try (OmniEdge engine = OmniEdge.open("/path/to/plan.json")) {
 *   Result r = engine.generate(Request.builder("Hello").chat(null).build(), new StreamListener() {
 *     public void onToken(TokenEvent t) { System.out.print(t.text); }
 *   });
 *   System.out.println(r.metrics);
 * }
 * }</pre>
 */
public final class OmniEdge implements AutoCloseable {
  /** How to open a plan. */
  public static final class Config {
    final String planPath;
    boolean allowUnqualified;
    int threads;

    public Config(String planPath) {
      if (planPath == null || planPath.isEmpty()) throw new IllegalArgumentException("planPath is empty");
      this.planPath = planPath;
    }

    /** Run artifacts whose validation reports did not pass (refused by default). */
    public Config allowUnqualified(boolean allow) {
      this.allowUnqualified = allow;
      return this;
    }

    /** Intra-op threads per backend; 0 (default): all cores. */
    public Config threads(int n) {
      if (n < 0) throw new IllegalArgumentException("threads < 0");
      this.threads = n;
      return this;
    }
  }

  // Native calls hold the read lock; close() takes the write lock, so the handle is never used
  // after it is freed (and close() waits for a load in progress).
  private final ReentrantReadWriteLock lock = new ReentrantReadWriteLock();
  private volatile long handle;
  private final Set<VoiceSession> voices = new HashSet<>();  // closed before the engine
  private volatile List<Placement> placements;
  private volatile int sampleRate;
  private volatile double planPrebufferMs = -1;

  private OmniEdge(long handle) {
    this.handle = handle;
  }

  /** The library's version and the stage-contract protocol it speaks, e.g. "0.3.0 (protocol 2)". */
  public static String version() {
    return NativeBridge.version();
  }

  /** Loads a plan (re-hashing every artifact first); blocks, so call it off the UI thread. */
  public static OmniEdge open(String planPath) {
    return open(new Config(planPath));
  }

  public static OmniEdge open(Config config) {
    OmniEdge engine = openAsync(config);
    try {
      engine.awaitLoaded();
    } catch (RuntimeException e) {
      engine.close();
      throw e;
    }
    return engine;
  }

  /**
   * Starts loading and returns at once: requests submitted meanwhile wait for the load, {@link #cancel()}
   * ends them, {@link #close()} waits for the load and frees everything.
   */
  public static OmniEdge openAsync(Config config) {
    return new OmniEdge(NativeBridge.create(config.planPath, config.allowUnqualified, config.threads));
  }

  /** Blocks until the plan is loaded; throws {@link OmniEdgeException} (e.g. "hash_mismatch") if it failed. */
  public void awaitLoaded() {
    lock.readLock().lock();
    try {
      NativeBridge.awaitOpen(live());
      if (placements == null) describe(NativeBridge.info(handle));
    } finally {
      lock.readLock().unlock();
    }
  }

  /** Queues a request; returns at once. */
  public Generation submit(Request request, StreamListener listener) {
    if (request == null) throw new IllegalArgumentException("request is null");
    lock.readLock().lock();
    try {
      Generation g = new Generation(this, listener);
      NativeBridge.submit(live(), request, g);
      return g;
    } finally {
      lock.readLock().unlock();
    }
  }

  /** Runs a request to its end (blocking); a cancelled request returns a result with {@link Result#cancelled()}. */
  public Result generate(Request request, StreamListener listener) throws InterruptedException {
    awaitLoaded();
    return submit(request, listener).await();
  }

  /** Ends the running request at every stage's next step, and every queued one. From any thread. */
  public void cancel() {
    if (Generation.IN_CALLBACK.get()) {  // a listener: the worker is running, so the handle is live, and
      NativeBridge.cancel(handle);       // taking the lock could wait behind a close() that joins this thread
      return;
    }
    lock.readLock().lock();
    try {
      if (handle != 0) NativeBridge.cancel(handle);
    } finally {
      lock.readLock().unlock();
    }
  }

  /** The prebuffer the plan's vocoder is made for (0: play from the first PCM, with an adaptive chunk
   * schedule; 200 with a fixed one): what a request that names none gets. -1 until loaded, or
   * without an audio stream. */
  public double planPrebufferMs() {
    return planPrebufferMs;
  }

  /** Where every graph of the plan runs (empty until loaded). */
  public List<Placement> placements() {
    List<Placement> p = placements;
    return p != null ? p : Collections.emptyList();
  }

  /** The audio stream's sample rate; on the worker thread, which runs only while the handle is live. */
  int sampleRateFromWorker() {
    describeFromWorker();
    return sampleRate;
  }

  List<Placement> placementsFromWorker() {
    describeFromWorker();
    return placements();
  }

  private void describeFromWorker() {
    if (placements == null) describe(NativeBridge.info(handle));  // once: then both fields are set
  }

  /** oe_session_info: plan, streams (sample rate...), placements, per-stage state. */
  public String infoJson() {
    lock.readLock().lock();
    try {
      return NativeBridge.info(live());
    } finally {
      lock.readLock().unlock();
    }
  }

  /** Cancels what runs, waits for the worker, frees the session. Idempotent. Not from a listener. */
  @Override
  public void close() {
    if (Generation.IN_CALLBACK.get()) throw new IllegalStateException("close() from a listener would wait for itself");
    List<VoiceSession> open;
    synchronized (voices) {
      open = new ArrayList<>(voices);
    }
    for (VoiceSession v : open) v.close();  // a conversation's response runs on this engine's session
    cancel();
    lock.writeLock().lock();
    try {
      if (handle != 0) NativeBridge.close(handle);
      handle = 0;
    } finally {
      lock.writeLock().unlock();
    }
  }

  /** The native handle for a {@link VoiceSession} over this engine (which then runs nothing else). */
  long handleForVoice(VoiceSession opening) {
    synchronized (voices) {
      voices.add(opening);
    }
    return live();
  }

  void voiceClosed(VoiceSession session) {
    synchronized (voices) {
      voices.remove(session);
    }
  }

  private long live() {
    if (handle == 0) throw new IllegalStateException("the engine is closed");
    return handle;
  }

  @SuppressWarnings("unchecked")
  private void describe(String infoJson) {
    Map<String, Object> info = Json.parseObject(infoJson);
    Object streams = info.get("streams");
    if (streams instanceof Map && ((Map<String, Object>) streams).get("audio") instanceof Map) {
      Map<String, Object> audio = (Map<String, Object>) ((Map<String, Object>) streams).get("audio");
      sampleRate = (int) Json.getLong(audio, "sample_rate", 0);
      Object prebuffer = audio.get("prebuffer_ms");
      if (prebuffer instanceof Number) planPrebufferMs = ((Number) prebuffer).doubleValue();
    }
    List<Placement> out = new ArrayList<>();
    for (Object p : Json.getList(info, "placements")) {
      if (p instanceof Map) out.add(Placement.fromJson((Map<String, Object>) p));
    }
    placements = Collections.unmodifiableList(out);
  }
}
