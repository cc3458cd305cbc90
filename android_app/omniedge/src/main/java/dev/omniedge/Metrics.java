package dev.omniedge;

import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * What one request measured, from the terminal events of its streams (NaN or -1 where a stream
 * did not exist), and where every graph ran.
 */
public final class Metrics {
  /** Text stream: time to the first token, prefill and decode rates, counts. */
  public final double ttftMs;
  public final double prefillTokensPerSecond;
  public final double decodeTokensPerSecond;
  public final long promptTokens;
  public final long generatedTokens;
  /** Audio stream: time to the first PCM chunk, real-time factor (< 1: faster than playback), underruns of
   * the native playback clock (prebuffer, then one chunk's duration per chunk). */
  public final double firstPcmMs;
  public final double rtf;
  public final long underruns;
  public final double underrunMs;
  public final double audioMs;
  public final double peakRssMb;
  public final List<Placement> placements;

  private Metrics(Map<String, Object> text, Map<String, Object> audio, List<Placement> placements) {
    ttftMs = Json.getDouble(text, "ttft_ms", Double.NaN);
    prefillTokensPerSecond = Json.getDouble(text, "prefill_tok_s", Double.NaN);
    decodeTokensPerSecond = Json.getDouble(text, "decode_tok_s", Double.NaN);
    promptTokens = Json.getLong(text, "n_prompt_tokens", -1);
    generatedTokens = Json.getLong(text, "n_generated_tokens", -1);
    firstPcmMs = Json.getDouble(audio, "first_pcm_ms", Double.NaN);
    rtf = Json.getDouble(audio, "rtf", Double.NaN);
    underruns = Json.getLong(audio, "underruns", -1);
    underrunMs = Json.getDouble(audio, "underrun_ms", Double.NaN);
    audioMs = Json.getDouble(audio, "audio_ms", Double.NaN);
    peakRssMb = Math.max(Json.getDouble(text, "peak_rss_mb", Double.NaN), Json.getDouble(audio, "peak_rss_mb", Double.NaN));
    this.placements = Collections.unmodifiableList(placements);
  }

  static Metrics of(Map<String, Object> textTerminal, Map<String, Object> audioTerminal, List<Placement> placements) {
    return new Metrics(textTerminal, audioTerminal, placements);
  }

  /** True if every graph ran on the NPU with no node elsewhere. */
  public boolean allOnNpu() {
    if (placements.isEmpty()) return false;
    for (Placement p : placements) {
      if (!"npu".equals(p.device) || p.nodesElsewhere != 0) return false;
    }
    return true;
  }

  /** Per stage: the devices its graphs ran on, e.g. "0:NPU 1:NPU 2:CPU" ({@link Placement#byStage}). */
  public String stageDevices() {
    return Placement.byStage(placements);
  }

  /** The one-line summary the demo app shows. */
  @Override
  public String toString() {
    StringBuilder out = new StringBuilder();
    if (!Double.isNaN(ttftMs)) {
      out.append(String.format(Locale.ROOT, "TTFT %.0f ms, %.1f tok/s", ttftMs, decodeTokensPerSecond));
    }
    if (!Double.isNaN(firstPcmMs)) {
      if (out.length() > 0) out.append(", ");
      out.append(String.format(Locale.ROOT, "first PCM %.0f ms, RTF %.2f, %d underruns", firstPcmMs, rtf, underruns));
    }
    if (!placements.isEmpty()) out.append(out.length() > 0 ? ", " : "").append("stages ").append(stageDevices());
    return out.toString();
  }
}
