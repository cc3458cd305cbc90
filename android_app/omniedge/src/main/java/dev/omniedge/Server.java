package dev.omniedge;

/**
 * A plan served over HTTP from this process, as {@code omni-edge-run serve} serves it: the OpenAI
 * Chat Completions and Audio Speech endpoints and the OpenPI policy websocket, so that the
 * official client libraries reach the phone unchanged (from a PC over {@code adb forward tcp:8000
 * tcp:8000}, or from other apps on it). Requests run on sessions opened at start; beyond them,
 * or beyond the memory the admission ledger has, a request is answered 429 at once. Close it
 * (try-with-resources) to end every stream and free the sessions.
 *
 * <pre>{@code
 * try (Server server = Server.start(new Server.Config("/path/to/plan.json").port(8000))) {
 *   Log.i("omniedge", "serving at " + server.url());  // http://127.0.0.1:8000/v1
 *   ...
 * }
 * }</pre>
 */
public final class Server implements AutoCloseable {
  /** How to serve a plan. */
  public static final class Config {
    final String planPath;
    String host = "127.0.0.1";
    int port = 8000;
    String apiKey;
    int maxSessions = 1;
    int threads;

    public Config(String planPath) {
      if (planPath == null || planPath.isEmpty()) throw new IllegalArgumentException("planPath is empty");
      this.planPath = planPath;
    }

    /** The address to listen on (default: loopback only; "0.0.0.0" opens it to the network). */
    public Config host(String host) {
      if (host == null || host.isEmpty()) throw new IllegalArgumentException("host is empty");
      this.host = host;
      return this;
    }

    /** The port (default 8000); 0: any free one, which {@link #url()} names. */
    public Config port(int port) {
      if (port < 0 || port > 65535) throw new IllegalArgumentException("port " + port + " is not 0-65535");
      this.port = port;
      return this;
    }

    /** Asked as {@code Authorization: Bearer KEY} (default: none). */
    public Config apiKey(String key) {
      this.apiKey = key;
      return this;
    }

    /** Sessions opened at start (default 1): requests served at once. */
    public Config maxSessions(int n) {
      if (n < 1 || n > 64) throw new IllegalArgumentException("maxSessions " + n + " is not 1-64");
      this.maxSessions = n;
      return this;
    }

    /** Intra-op threads per session's backends; 0 (default): all cores. */
    public Config threads(int n) {
      if (n < 0) throw new IllegalArgumentException("threads < 0");
      this.threads = n;
      return this;
    }
  }

  private long handle;
  private final String url;

  private Server(long handle, String url) {
    this.handle = handle;
    this.url = url;
  }

  /** Loads the plan's sessions and listens; blocks while they load, so call it off the UI thread. */
  public static Server start(Config config) {
    long handle = NativeBridge.serverStart(config.planPath, config.host, config.port,
        config.apiKey == null ? "" : config.apiKey, config.maxSessions, config.threads);
    try {
      return new Server(handle, NativeBridge.serverUrl(handle));
    } catch (RuntimeException e) {
      NativeBridge.serverStop(handle);  // not left running without an owner
      throw e;
    }
  }

  /** The base URL clients take, e.g. "http://127.0.0.1:8000/v1". */
  public String url() {
    return url;
  }

  /** Ends every running request (each stream with its terminal chunk), closes the connections, frees the sessions. */
  @Override
  public synchronized void close() {
    if (handle == 0) return;
    NativeBridge.serverStop(handle);
    handle = 0;
  }
}
