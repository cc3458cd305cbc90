package dev.omniedge;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * One request, whatever the plan: a text plan answers the prompt, a speech plan speaks it, an
 * omni plan answers it in text and speech. Built with {@link #builder(String)}; immutable.
 */
public final class Request {
  final String prompt;
  final int[] promptIds;
  final boolean chat;
  final String systemPrompt;
  final boolean continueConversation;
  final int maxNewTokens;
  final Sampling sampling;
  final String[] stopStrings;
  final boolean ignoreStopTokens;
  final int maxFrames;
  final Sampling speechSampling;
  final double prebufferMs;
  final String[] mediaKinds;  // "image" | "audio", in prompt order
  final byte[][] mediaData;   // each item's file bytes
  // A policy plan's observation (hasObservation): capture time, camera images by name, state, noise.
  final boolean hasObservation;
  final double observationTimestampMs;
  final String[] cameraNames;
  final byte[][] cameraImages;
  final float[] state;
  final float[] noise;  // noiseRows x noiseCols, row-major; null: drawn from noiseSeed
  final int noiseRows;
  final int noiseCols;
  final long noiseSeed;
  final boolean resetHistory;  // a plan with a frame history (InternVLA-A1) starts it again
  final double deadlineMs;

  private Request(Builder b) {
    prompt = b.prompt;
    promptIds = b.promptIds == null ? null : b.promptIds.clone();
    chat = b.chat;
    systemPrompt = b.systemPrompt;
    continueConversation = b.continueConversation;
    maxNewTokens = b.maxNewTokens;
    sampling = b.sampling;
    stopStrings = b.stopStrings.toArray(new String[0]);
    ignoreStopTokens = b.ignoreStopTokens;
    maxFrames = b.maxFrames;
    speechSampling = b.speechSampling;
    prebufferMs = b.prebufferMs;
    mediaKinds = b.mediaKinds.toArray(new String[0]);
    mediaData = b.mediaData.toArray(new byte[0][]);
    hasObservation = b.hasObservation;
    observationTimestampMs = b.observationTimestampMs;
    cameraNames = b.cameraNames.toArray(new String[0]);
    cameraImages = b.cameraImages.toArray(new byte[0][]);
    state = b.state == null ? null : b.state.clone();
    noise = b.noise == null ? null : b.noise.clone();
    noiseRows = b.noiseRows;
    noiseCols = b.noiseCols;
    noiseSeed = b.noiseSeed;
    resetHistory = b.resetHistory;
    deadlineMs = b.deadlineMs;
  }

  public List<String> stopStrings() {
    return Arrays.asList(stopStrings.clone());
  }

  /** A request for this text (to answer, or for a speech plan to speak). */
  public static Builder builder(String prompt) {
    if (prompt == null) throw new IllegalArgumentException("prompt is null");
    if (prompt.indexOf('\0') >= 0) throw new IllegalArgumentException("prompt contains a NUL character");
    return new Builder(prompt, null);
  }

  /** A request for these exact token ids instead of text. */
  public static Builder builder(int[] promptIds) {
    if (promptIds == null || promptIds.length == 0) throw new IllegalArgumentException("promptIds is empty");
    return new Builder("", promptIds);
  }

  public static final class Builder {
    private final String prompt;
    private final int[] promptIds;
    private boolean chat;
    private String systemPrompt;
    private boolean continueConversation;
    private int maxNewTokens;
    private Sampling sampling = Sampling.PLAN;
    private final List<String> stopStrings = new ArrayList<>();
    private boolean ignoreStopTokens;
    private int maxFrames;
    private Sampling speechSampling = Sampling.PLAN;
    private double prebufferMs = -1;  // the plan's: OmniEdge.planPrebufferMs()
    private final List<String> mediaKinds = new ArrayList<>();
    private final List<byte[]> mediaData = new ArrayList<>();
    private boolean hasObservation;
    private double observationTimestampMs = -1;
    private final List<String> cameraNames = new ArrayList<>();
    private final List<byte[]> cameraImages = new ArrayList<>();
    private float[] state;
    private float[] noise;
    private int noiseRows;
    private int noiseCols;
    private long noiseSeed;
    private boolean resetHistory;
    private double deadlineMs;

    private Builder(String prompt, int[] promptIds) {
      this.prompt = prompt;
      this.promptIds = promptIds;
    }

    /** Format the prompt as a ChatML user message (with an optional system prompt). */
    public Builder chat(String systemPrompt) {
      if (systemPrompt != null && systemPrompt.indexOf('\0') >= 0) throw new IllegalArgumentException("NUL in systemPrompt");
      this.chat = true;
      this.systemPrompt = systemPrompt;
      return this;
    }

    /** Append to the resident conversation instead of starting a new one. */
    public Builder continueConversation() {
      this.continueConversation = true;
      return this;
    }

    /** Text tokens to generate at most (0: the plan's default). */
    public Builder maxNewTokens(int n) {
      if (n < 0) throw new IllegalArgumentException("maxNewTokens < 0");
      this.maxNewTokens = n;
      return this;
    }

    public Builder sampling(Sampling s) {
      this.sampling = s == null ? Sampling.PLAN : s;
      return this;
    }

    public Builder stop(String s) {
      if (s == null || s.isEmpty() || s.indexOf('\0') >= 0) throw new IllegalArgumentException("empty stop string or NUL in it");
      stopStrings.add(s);
      return this;
    }

    /** Always generate maxNewTokens (the plan's stop tokens do not end the text). */
    public Builder ignoreStopTokens() {
      this.ignoreStopTokens = true;
      return this;
    }

    /** Audio frames at most (12.5 per second of audio; 0: the plan's default). */
    public Builder maxFrames(int n) {
      if (n < 0) throw new IllegalArgumentException("maxFrames < 0");
      this.maxFrames = n;
      return this;
    }

    public Builder speechSampling(Sampling s) {
      this.speechSampling = s == null ? Sampling.PLAN : s;
      return this;
    }

    /** Audio the playback clock queues before it starts (the native rule; default: the plan's, see
     * OmniEdge.planPrebufferMs()). */
    public Builder prebufferMs(double ms) {
      if (!(ms >= 0 && ms <= 60_000)) throw new IllegalArgumentException("prebufferMs out of [0, 60000]");
      this.prebufferMs = ms;
      return this;
    }

    /** An image file (PNG, JPEG, BMP, GIF) before the prompt, for a multimodal plan's vision encoder;
     * media keep the order they are added in. */
    public Builder image(byte[] file) {
      return media("image", file);
    }

    /** A WAV file before the prompt, for a multimodal plan's audio encoder. */
    public Builder audio(byte[] file) {
      return media("audio", file);
    }

    private Builder media(String kind, byte[] file) {
      if (file == null || file.length == 0) throw new IllegalArgumentException("empty " + kind + " file");
      mediaKinds.add(kind);
      mediaData.add(file.clone());
      return this;
    }

    /** A policy plan's observation, captured at this time (ms since the Unix epoch, the system
     * clock); the prompt is its task. Add its images with {@link #camera}. */
    public Builder observation(double timestampMs) {
      if (!(timestampMs >= 0)) throw new IllegalArgumentException("timestampMs < 0");
      this.hasObservation = true;
      this.observationTimestampMs = timestampMs;
      return this;
    }

    /** One camera's image file (PNG, JPEG, BMP, GIF), by the name the policy's plan gives it. */
    public Builder camera(String name, byte[] file) {
      if (name == null || name.isEmpty() || name.indexOf('\0') >= 0) throw new IllegalArgumentException("bad camera name");
      if (file == null || file.length == 0) throw new IllegalArgumentException("empty image for camera " + name);
      cameraNames.add(name);
      cameraImages.add(file.clone());
      return this;
    }

    /** The robot state (zero-padded to the model's state dimension). */
    public Builder state(float[] values) {
      this.state = values == null ? null : values.clone();
      return this;
    }

    /** The flow's initial noise, rows x cols (chunk x action dim) row-major, to compare with a
     * reference; without it the noise is drawn from {@link #noiseSeed}. */
    public Builder noise(float[] values, int rows, int cols) {
      if (values == null || rows <= 0 || cols <= 0 || (long) rows * cols != values.length) {
        throw new IllegalArgumentException("noise is rows x cols values");
      }
      this.noise = values.clone();
      this.noiseRows = rows;
      this.noiseCols = cols;
      return this;
    }

    public Builder noiseSeed(long seed) {
      this.noiseSeed = seed;
      return this;
    }

    /** A new episode: a plan that keeps each camera's frame history (InternVLA-A1) starts it
     * again with this observation. A camera given several images gives its whole history, oldest
     * first. */
    public Builder resetHistory() {
      this.resetHistory = true;
      return this;
    }

    /** The action is due this long after the observation's capture (reported, not enforced). */
    public Builder deadlineMs(double ms) {
      if (!(ms >= 0 && ms <= 3_600_000)) throw new IllegalArgumentException("deadlineMs out of [0, 3600000]");
      this.deadlineMs = ms;
      return this;
    }

    public Request build() {
      return new Request(this);
    }
  }
}
