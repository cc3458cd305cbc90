package dev.omniedge;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.ConnectException;
import java.net.HttpURLConnection;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import org.junit.BeforeClass;
import org.junit.Test;

/**
 * dev.omniedge.Server on the default text plan (android_app/host-test.sh sets the properties): the
 * app's own server answers an OpenAI chat completion with the native CLI's greedy text, asks for
 * its key, and is gone once closed.
 */
public class ServerTest {
  static final String QUESTION = "def greet(name):";

  @BeforeClass
  public static void properties() throws Exception {
    OmniEdgeTest.properties();
  }

  @Test(timeout = 300_000)
  public void aChatCompletionEqualsTheCliAndClosingStopsIt() throws Exception {
    StringBuilder expected = new StringBuilder();
    for (String line : OmniEdgeTest.runCli("--plan", OmniEdgeTest.textPlan, "--chat", "--prompt", QUESTION,
        "--max-new-tokens", "8", "--temperature", "0", "--threads", "1")) {
      Map<String, Object> e = Json.parseObject(line);
      if ("token".equals(e.get("kind"))) expected.append(Json.getString(e, "text", ""));
    }
    String url;
    try (Server server = Server.start(new Server.Config(OmniEdgeTest.textPlan).port(0).apiKey("k").threads(1))) {
      url = server.url();
      assertTrue(url, url.startsWith("http://127.0.0.1:") && url.endsWith("/v1"));
      Map<String, Object> models = Json.parseObject(request(url + "/models", null, "k", 200));
      String model = Json.getString(asMap(Json.getList(models, "data").get(0)), "id", "");
      String body = "{\"model\": \"" + model + "\", \"max_tokens\": 8, \"temperature\": 0, \"messages\": "
          + "[{\"role\": \"user\", \"content\": \"" + QUESTION + "\"}]}";
      Map<String, Object> reply = Json.parseObject(request(url + "/chat/completions", body, "k", 200));
      Map<String, Object> choice = asMap(Json.getList(reply, "choices").get(0));
      assertEquals(expected.toString(), Json.getString(asMap(choice.get("message")), "content", null));
      assertTrue(request(url + "/chat/completions", body, "wrong", 401).contains("invalid_api_key"));
    }
    final String closed = url;
    assertThrows(ConnectException.class, () -> request(closed + "/models", null, "k", 200));
  }

  @Test
  public void aBadPlanRaisesItsCode() {
    OmniEdgeException e = assertThrows(OmniEdgeException.class,
        () -> Server.start(new Server.Config(OmniEdgeTest.scratch.resolve("missing.json").toString()).port(0)));
    assertTrue(e.getMessage(), e.getMessage().contains("missing.json"));
  }

  @SuppressWarnings("unchecked")
  static Map<String, Object> asMap(Object o) {
    return (Map<String, Object>) o;
  }

  /** The response body of a GET (body null) or a JSON POST, after checking its status. */
  static String request(String url, String body, String key, int status) throws IOException {
    HttpURLConnection c = (HttpURLConnection) URI.create(url).toURL().openConnection();
    c.setRequestProperty("Authorization", "Bearer " + key);
    if (body != null) {
      c.setRequestMethod("POST");
      c.setDoOutput(true);
      c.setRequestProperty("Content-Type", "application/json");
      try (OutputStream out = c.getOutputStream()) {
        out.write(body.getBytes(StandardCharsets.UTF_8));
      }
    }
    assertEquals(url, status, c.getResponseCode());
    try (InputStream in = status < 400 ? c.getInputStream() : c.getErrorStream()) {
      return new String(in.readAllBytes(), StandardCharsets.UTF_8);
    }
  }
}
