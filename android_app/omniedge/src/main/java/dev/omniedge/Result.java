package dev.omniedge;

import java.util.Collections;
import java.util.Map;

/** How a request ended: each stream's finish reason, what it produced, and its metrics. */
public final class Result {
  /** Stream ("text", "audio") to its finish reason ("stop", "length", "cancelled", ...). */
  public final Map<String, String> finishReasons;
  private final int[] tokenIds;
  public final String text;
  /** Audio samples delivered, over every chunk. */
  public final long samples;
  public final Metrics metrics;

  Result(Map<String, String> finishReasons, int[] tokenIds, String text, long samples, Metrics metrics) {
    this.finishReasons = Collections.unmodifiableMap(finishReasons);
    this.tokenIds = tokenIds;
    this.text = text;
    this.samples = samples;
    this.metrics = metrics;
  }

  /** Every text token id, in order. */
  public int[] tokenIds() {
    return tokenIds.clone();
  }

  /** True if any stream ended because the request was cancelled. */
  public boolean cancelled() {
    return finishReasons.containsValue("cancelled");
  }
}
