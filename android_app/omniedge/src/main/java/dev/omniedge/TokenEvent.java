package dev.omniedge;

/** One step of a text stream. */
public final class TokenEvent {
  public final long seq;
  private final int[] tokenIds;
  /** The text these ids completed (may be empty while a multi-byte character is incomplete). */
  public final String text;

  TokenEvent(long seq, int[] tokenIds, String text) {
    this.seq = seq;
    this.tokenIds = tokenIds;
    this.text = text;
  }

  public int[] tokenIds() {
    return tokenIds.clone();
  }
}
