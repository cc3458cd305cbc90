package dev.omniedge;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.Test;

public class JsonTest {
  @Test
  public void decodesTheControllerEvents() {
    Map<String, Object> e = Json.parseObject(
        "{\"kind\":\"token\",\"seq\":3,\"token_ids\":[1,22,333],\"text\":\"a\\u00e9\\ud83d\\ude00\\n\",\"x\":-1.5e2,"
        + "\"n\":null,\"t\":true}");
    assertEquals("token", e.get("kind"));
    assertEquals(3L, e.get("seq"));
    assertEquals(Arrays.asList(1L, 22L, 333L), e.get("token_ids"));
    assertEquals("a\u00e9\ud83d\ude00\n", e.get("text"));
    assertEquals(-150.0, (Double) e.get("x"), 0.0);
    assertNull(e.get("n"));
    assertEquals(Boolean.TRUE, e.get("t"));
    assertEquals(12345678901234L, Json.parse(" 12345678901234 "));
  }

  @Test
  public void refusesMalformedText() {
    for (String bad : new String[] {"", "{", "{\"a\":}", "[1,]", "{\"a\" 1}", "\"\\x\"", "01", "1.", "-", "tru",
        "{\"a\":1}x", "\"\u0001\"", "\"\\u12\"", "[1 2]", "{1:2}", "nul"}) {
      assertThrows(bad, IllegalArgumentException.class, () -> Json.parse(bad));
    }
    StringBuilder deep = new StringBuilder();
    for (int i = 0; i < 100; i++) deep.append('[');
    assertThrows(IllegalArgumentException.class, () -> Json.parse(deep.toString()));
    assertThrows(IllegalArgumentException.class, () -> Json.parseObject("[1]"));
  }

  /** Random byte soup and cut-off events never escape as anything but IllegalArgumentException. */
  @Test
  public void fuzzedInputOnlyFailsCleanly() {
    Random random = new Random(7);
    String event = "{\"kind\":\"done\",\"finish_reason\":\"length\",\"ttft_ms\":12.5,\"token_ids\":[1,2],\"s\":\"\\\"q\\\"\"}";
    for (int i = 0; i < 20000; i++) {
      String text;
      if (i % 2 == 0) {
        text = event.substring(0, random.nextInt(event.length() + 1));
      } else {
        char[] chars = new char[random.nextInt(24)];
        String alphabet = "{}[]\",:0123456789-.eEtruefalsn\\u ";
        for (int k = 0; k < chars.length; k++) chars[k] = alphabet.charAt(random.nextInt(alphabet.length()));
        text = new String(chars);
      }
      try {
        Json.parse(text);
      } catch (IllegalArgumentException expected) {
        assertTrue(expected.getMessage().startsWith("malformed JSON") || expected.getMessage().contains("null"));
      }
    }
    List<Object> list = Json.getList(Json.parseObject(event), "token_ids");
    assertEquals(2, list.size());
  }
}
