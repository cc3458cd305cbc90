package dev.omniedge;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The controller's event and info JSON, decoded without a library (this layer has no Android or
 * third-party imports): objects become Map, arrays List, integers Long, other numbers Double.
 * Strict RFC 8259; nesting deeper than 64 is refused.
 */
final class Json {
  private static final int MAX_DEPTH = 64;
  private final String text;
  private int pos;

  private Json(String text) {
    this.text = text;
  }

  static Object parse(String text) {
    if (text == null) throw new IllegalArgumentException("JSON text is null");
    Json p = new Json(text);
    Object value = p.value(0);
    p.space();
    if (p.pos != text.length()) throw p.error("text after the value");
    return value;
  }

  /** {@code text} as a JSON string literal (quotes, backslashes and control characters escaped). */
  static String quote(String text) {
    StringBuilder out = new StringBuilder("\"");
    for (int i = 0; i < text.length(); i++) {
      char c = text.charAt(i);
      if (c == '"' || c == '\\') {
        out.append('\\').append(c);
      } else if (c < 0x20) {
        out.append(String.format("\\u%04x", (int) c));
      } else {
        out.append(c);
      }
    }
    return out.append('"').toString();
  }

  @SuppressWarnings("unchecked")
  static Map<String, Object> parseObject(String text) {
    Object v = parse(text);
    if (!(v instanceof Map)) throw new IllegalArgumentException("expected a JSON object");
    return (Map<String, Object>) v;
  }

  static String getString(Map<String, Object> m, String key, String fallback) {
    Object v = m.get(key);
    return v instanceof String ? (String) v : fallback;
  }

  static long getLong(Map<String, Object> m, String key, long fallback) {
    Object v = m.get(key);
    return v instanceof Number ? ((Number) v).longValue() : fallback;
  }

  static double getDouble(Map<String, Object> m, String key, double fallback) {
    Object v = m.get(key);
    return v instanceof Number ? ((Number) v).doubleValue() : fallback;
  }

  @SuppressWarnings("unchecked")
  static List<Object> getList(Map<String, Object> m, String key) {
    Object v = m.get(key);
    return v instanceof List ? (List<Object>) v : new ArrayList<>();
  }

  private IllegalArgumentException error(String what) {
    return new IllegalArgumentException("malformed JSON at offset " + pos + ": " + what);
  }

  private void space() {
    while (pos < text.length()) {
      char c = text.charAt(pos);
      if (c != ' ' && c != '\t' && c != '\n' && c != '\r') return;
      pos++;
    }
  }

  private Object value(int depth) {
    if (depth > MAX_DEPTH) throw error("nested deeper than " + MAX_DEPTH);
    space();
    if (pos >= text.length()) throw error("unexpected end");
    char c = text.charAt(pos);
    switch (c) {
      case '{':
        return object(depth);
      case '[':
        return array(depth);
      case '"':
        return string();
      case 't':
        return literal("true", Boolean.TRUE);
      case 'f':
        return literal("false", Boolean.FALSE);
      case 'n':
        return literal("null", null);
      default:
        if (c == '-' || (c >= '0' && c <= '9')) return number();
        throw error("unexpected '" + c + "'");
    }
  }

  private Object literal(String word, Object value) {
    if (!text.startsWith(word, pos)) throw error("expected " + word);
    pos += word.length();
    return value;
  }

  private Map<String, Object> object(int depth) {
    Map<String, Object> out = new LinkedHashMap<>();
    pos++;
    space();
    if (peek() == '}') {
      pos++;
      return out;
    }
    while (true) {
      space();
      if (peek() != '"') throw error("expected a key");
      String key = string();
      space();
      expect(':');
      out.put(key, value(depth + 1));
      space();
      if (peek() == ',') {
        pos++;
      } else {
        expect('}');
        return out;
      }
    }
  }

  private List<Object> array(int depth) {
    List<Object> out = new ArrayList<>();
    pos++;
    space();
    if (peek() == ']') {
      pos++;
      return out;
    }
    while (true) {
      out.add(value(depth + 1));
      space();
      if (peek() == ',') {
        pos++;
      } else {
        expect(']');
        return out;
      }
    }
  }

  private char peek() {
    if (pos >= text.length()) throw error("unexpected end");
    return text.charAt(pos);
  }

  private void expect(char c) {
    if (peek() != c) throw error("expected '" + c + "'");
    pos++;
  }

  private String string() {
    pos++;  // the opening quote
    StringBuilder out = new StringBuilder();
    while (true) {
      char c = peek();
      pos++;
      if (c == '"') return out.toString();
      if (c < 0x20) throw error("control character in a string");
      if (c != '\\') {
        out.append(c);
        continue;
      }
      char e = peek();
      pos++;
      switch (e) {
        case '"': out.append('"'); break;
        case '\\': out.append('\\'); break;
        case '/': out.append('/'); break;
        case 'b': out.append('\b'); break;
        case 'f': out.append('\f'); break;
        case 'n': out.append('\n'); break;
        case 'r': out.append('\r'); break;
        case 't': out.append('\t'); break;
        case 'u': out.append(hex4()); break;
        default: throw error("bad escape \\" + e);
      }
    }
  }

  private char hex4() {
    if (pos + 4 > text.length()) throw error("short \\u escape");
    int v = 0;
    for (int i = 0; i < 4; i++) {
      int d = Character.digit(text.charAt(pos + i), 16);
      if (d < 0) throw error("bad \\u escape");
      v = v * 16 + d;
    }
    pos += 4;
    return (char) v;  // surrogate pairs arrive as two escapes and join in the String
  }

  private Object number() {
    int start = pos;
    if (peek() == '-') pos++;
    if (peek() == '0') {
      pos++;
    } else {
      digits();
    }
    boolean integral = true;
    if (pos < text.length() && text.charAt(pos) == '.') {
      pos++;
      digits();
      integral = false;
    }
    if (pos < text.length() && (text.charAt(pos) == 'e' || text.charAt(pos) == 'E')) {
      pos++;
      if (pos < text.length() && (text.charAt(pos) == '+' || text.charAt(pos) == '-')) pos++;
      digits();
      integral = false;
    }
    String n = text.substring(start, pos);
    if (integral) {
      try {
        return Long.parseLong(n);
      } catch (NumberFormatException tooLarge) {
        return Double.parseDouble(n);
      }
    }
    return Double.parseDouble(n);
  }

  private void digits() {
    int start = pos;
    while (pos < text.length() && text.charAt(pos) >= '0' && text.charAt(pos) <= '9') pos++;
    if (pos == start) throw error("expected a digit");
  }
}
