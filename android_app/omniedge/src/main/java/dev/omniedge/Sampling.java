package dev.omniedge;

/** How a stream picks tokens. {@link #PLAN} keeps the plan's own sampling. */
public final class Sampling {
  public static final Sampling PLAN = new Sampling(true, 0f, 0, 1f, 0f, 1f, 0L);
  public static final Sampling GREEDY = new Sampling(false, 0f, 0, 1f, 0f, 1f, 0L);

  final boolean usePlan;
  final float temperature;
  final int topK;
  final float topP;
  final float minP;
  final float repetitionPenalty;
  final long seed;

  private Sampling(boolean usePlan, float temperature, int topK, float topP, float minP, float repetitionPenalty,
                   long seed) {
    this.usePlan = usePlan;
    this.temperature = temperature;
    this.topK = topK;
    this.topP = topP;
    this.minP = minP;
    this.repetitionPenalty = repetitionPenalty;
    this.seed = seed;
  }

  /** Temperature sampling (0: greedy) with top-k (0: off), top-p, min-p, repetition penalty and a seed. */
  public static Sampling of(float temperature, int topK, float topP, float minP, float repetitionPenalty, long seed) {
    if (!(temperature >= 0f) || topK < 0 || !(topP > 0f && topP <= 1f) || !(minP >= 0f && minP <= 1f)
        || !(repetitionPenalty > 0f)) {
      throw new IllegalArgumentException("sampling out of range: temperature >= 0, top_k >= 0, 0 < top_p <= 1, "
          + "0 <= min_p <= 1, repetition_penalty > 0");
    }
    return new Sampling(false, temperature, topK, topP, minP, repetitionPenalty, seed);
  }
}
