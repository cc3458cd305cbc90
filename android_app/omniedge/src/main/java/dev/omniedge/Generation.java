package dev.omniedge;

import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/** One submitted request: wait for its {@link Result}, or cancel it. */
public final class Generation {
  /** Set while a listener runs on the worker thread (close() from there would wait for itself). */
  static final ThreadLocal<Boolean> IN_CALLBACK = ThreadLocal.withInitial(() -> Boolean.FALSE);

  private final OmniEdge engine;
  private final StreamListener listener;
  private final CountDownLatch done = new CountDownLatch(1);
  private final Map<String, String> finishReasons = new LinkedHashMap<>();
  private final Map<String, Map<String, Object>> terminals = new LinkedHashMap<>();
  private int[] tokenIds = new int[64];
  private int nTokens;
  private final StringBuilder text = new StringBuilder();
  private long samples;
  private volatile Throwable listenerError;
  private volatile Result result;
  private volatile OmniEdgeException error;

  Generation(OmniEdge engine, StreamListener listener) {
    this.engine = engine;
    this.listener = listener == null ? new StreamListener() {} : listener;
  }

  /** Blocks until the request ended; throws if it failed (a cancelled request is a result). */
  public Result await() throws InterruptedException {
    done.await();
    return outcome();
  }

  /** As {@link #await()}, or null if it has not ended within the timeout. */
  public Result await(long timeout, TimeUnit unit) throws InterruptedException {
    return done.await(timeout, unit) ? outcome() : null;
  }

  public boolean isDone() {
    return done.getCount() == 0;
  }

  /** Cancels this request (and, as the engine runs one at a time, whatever is queued behind it). */
  public void cancel() {
    if (!isDone()) engine.cancel();
  }

  private Result outcome() {
    if (error != null) throw error;
    return result;
  }

  // ---- called by the native worker thread, one at a time ------------------------------------

  /** One event of a stream; returns false to cancel the request. */
  boolean onEvent(String stream, long stageId, String json, boolean terminal, float[] pcm, short[] pcm16) {
    if (listenerError != null) return false;
    IN_CALLBACK.set(Boolean.TRUE);
    try {
      Map<String, Object> event = Json.parseObject(json);
      if (terminal) {
        finishReasons.put(stream, Json.getString(event, "finish_reason", Json.getString(event, "kind", "")));
        terminals.put(stream, event);
      } else if (pcm != null || pcm16 != null) {
        PcmChunk chunk = new PcmChunk(Json.getLong(event, "first_sample", samples), engine.sampleRateFromWorker(), pcm,
            pcm16);
        samples += chunk.size();
        listener.onPcm(chunk);
      } else if ("action".equals(Json.getString(event, "kind", ""))) {
        listener.onAction(ActionChunk.of(event));
      } else if ("token".equals(Json.getString(event, "kind", ""))) {
        TokenEvent token = new TokenEvent(Json.getLong(event, "seq", 0), ids(Json.getList(event, "token_ids")),
            Json.getString(event, "text", ""));
        for (int id : token.tokenIds()) addToken(id);
        text.append(token.text);
        listener.onToken(token);
      }
      return true;
    } catch (Throwable t) {  // the listener's (or a malformed event): ends the request, await() rethrows
      listenerError = t;
      return false;
    } finally {
      IN_CALLBACK.set(Boolean.FALSE);
    }
  }

  /** The request ended: code null on success, else the C error code and message. */
  void onComplete(String code, String message) {
    try {
      complete(code, message);
    } catch (RuntimeException | Error e) {  // whatever happens here, await() must return
      error = new OmniEdgeException("internal", String.valueOf(e));
    } finally {
      done.countDown();
    }
  }

  private void complete(String code, String message) {
    if (listenerError != null) {
      OmniEdgeException e = new OmniEdgeException("listener", String.valueOf(listenerError));
      e.initCause(listenerError);
      error = e;
    } else if (code != null && !code.equals("cancelled")) {
      error = new OmniEdgeException(code, message);
    } else {
      if (code != null && finishReasons.isEmpty()) finishReasons.put("request", "cancelled");
      Metrics metrics = Metrics.of(terminal("text"), terminal("audio"), placements());
      result = new Result(finishReasons, Arrays.copyOf(tokenIds, nTokens), text.toString(), samples, metrics);
    }
  }

  private List<Placement> placements() {
    try {
      return engine.placementsFromWorker();
    } catch (RuntimeException notLoaded) {  // a request that ended before the plan loaded
      return new java.util.ArrayList<>();
    }
  }

  private Map<String, Object> terminal(String stream) {
    Map<String, Object> t = terminals.get(stream);
    return t != null ? t : new LinkedHashMap<>();
  }

  private void addToken(int id) {
    if (nTokens == tokenIds.length) tokenIds = Arrays.copyOf(tokenIds, nTokens * 2);
    tokenIds[nTokens++] = id;
  }

  private static int[] ids(List<Object> list) {
    int[] out = new int[list.size()];
    for (int i = 0; i < out.length; i++) out[i] = ((Number) list.get(i)).intValue();
    return out;
  }
}
