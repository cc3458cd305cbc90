package dev.omniedge;

/**
 * An error of the controller, with its stable machine code (the C ABI's {@code oe_error_reason}:
 * "hash_mismatch", "invalid_plan", "admission", "cancelled", ...) and a message for people.
 */
public final class OmniEdgeException extends RuntimeException {
  private static final long serialVersionUID = 1L;
  private final String code;

  public OmniEdgeException(String code, String message) {
    super(code + ": " + message);
    this.code = code;
  }

  /** The C error code's name, e.g. {@code "hash_mismatch"}. */
  public String code() {
    return code;
  }
}
