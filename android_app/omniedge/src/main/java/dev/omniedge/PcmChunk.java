package dev.omniedge;

/** Samples of an audio stream, float32 in [-1, 1] or int16, as the plan declares. */
public final class PcmChunk {
  /** Index of this chunk's first sample in the utterance. */
  public final long firstSample;
  public final int sampleRate;
  private final float[] floats;
  private final short[] shorts;

  PcmChunk(long firstSample, int sampleRate, float[] floats, short[] shorts) {
    this.firstSample = firstSample;
    this.sampleRate = sampleRate;
    this.floats = floats;
    this.shorts = shorts;
  }

  public int size() {
    return floats != null ? floats.length : shorts.length;
  }

  public boolean isFloat() {
    return floats != null;
  }

  /** The samples as floats (int16 scaled by 1/32768). */
  public float[] toFloat() {
    if (floats != null) return floats.clone();
    float[] out = new float[shorts.length];
    for (int i = 0; i < shorts.length; i++) out[i] = shorts[i] / 32768f;
    return out;
  }

  /** The samples as int16 (float clamped to [-1, 1] and scaled by 32767), e.g. for AudioTrack. */
  public short[] toShort() {
    if (shorts != null) return shorts.clone();
    short[] out = new short[floats.length];
    for (int i = 0; i < floats.length; i++) {
      float v = Math.max(-1f, Math.min(1f, floats[i]));
      out[i] = (short) Math.round(v * 32767f);
    }
    return out;
  }
}
