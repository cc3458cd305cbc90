package dev.omniedge.app;

import android.Manifest;
import android.app.Activity;
import android.content.pm.PackageManager;
import android.os.Bundle;
import android.os.Handler;
import android.os.Looper;
import android.system.ErrnoException;
import android.system.Os;
import android.util.Log;
import android.view.View;
import android.widget.AdapterView;
import android.widget.ArrayAdapter;
import android.widget.Button;
import android.widget.EditText;
import android.widget.ScrollView;
import android.widget.Spinner;
import android.widget.Switch;
import android.widget.TextView;
import dev.omniedge.Generation;
import dev.omniedge.OmniEdge;
import dev.omniedge.OmniEdgeException;
import dev.omniedge.PcmChunk;
import dev.omniedge.Placement;
import dev.omniedge.Request;
import dev.omniedge.Result;
import dev.omniedge.Server;
import dev.omniedge.StreamListener;
import dev.omniedge.TokenEvent;
import java.io.File;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

/**
 * The demo: pick a plan pushed by `omni-edge push --app`, ask, watch the reply stream in (and hear
 * it, for a speech or omni plan), cancel, and read where every stage ran. Loading and generation
 * never run on the UI thread: the engine's own worker runs requests, `engines` opens and closes.
 * Leaving the app or rotating it cancels what runs; the engine is closed with the Activity.
 */
public final class MainActivity extends Activity {
  private static final String TAG = "omni-edge";
  private static final String STATE_PLAN = "plan";

  // One thread for open/close (both block): shared by every Activity instance, so a rotation's
  // close and the next open run in order.
  private static final ExecutorService engines = Executors.newSingleThreadExecutor();

  private final Handler ui = new Handler(Looper.getMainLooper());
  private List<File> plans = new ArrayList<>();
  private int openToken;            // a load that finishes after another plan was picked is closed
  private OmniEdge engine;          // UI thread only
  private Server server;            // UI thread only: the Serve switch's, in place of the engine
  private Generation running;
  private PcmPlayer player;

  private Spinner planPicker;
  private TextView metrics;
  private TextView reply;
  private ScrollView scroll;
  private EditText prompt;
  private Switch speak;
  private Switch serve;
  private Switch voice;
  private VoiceMode voiceMode;      // UI thread only: the Voice switch's conversation over the engine
  private Button send;
  private Button cancel;

  @Override
  protected void onCreate(Bundle state) {
    super.onCreate(state);
    setContentView(R.layout.activity_main);
    planPicker = findViewById(R.id.plans);
    metrics = findViewById(R.id.metrics);
    reply = findViewById(R.id.reply);
    scroll = findViewById(R.id.scroll);
    prompt = findViewById(R.id.prompt);
    speak = findViewById(R.id.speak);
    serve = findViewById(R.id.serve);
    voice = findViewById(R.id.voice);
    send = findViewById(R.id.send);
    cancel = findViewById(R.id.cancel);
    pointTheDspAtOurLibraries();

    File root = getExternalFilesDir(null);
    plans = PlanFiles.under(root);
    if (plans.isEmpty()) {
      metrics.setText(getString(R.string.no_plans, String.valueOf(root)));
      return;
    }
    List<String> names = new ArrayList<>();
    for (File plan : plans) names.add(plan.getParentFile().getName());
    ArrayAdapter<String> adapter = new ArrayAdapter<>(this, android.R.layout.simple_spinner_item, names);
    adapter.setDropDownViewResource(android.R.layout.simple_spinner_dropdown_item);
    planPicker.setAdapter(adapter);
    planPicker.setSelection(state == null ? 0 : Math.max(0, Math.min(state.getInt(STATE_PLAN, 0), plans.size() - 1)));
    planPicker.setOnItemSelectedListener(new AdapterView.OnItemSelectedListener() {
      @Override
      public void onItemSelected(AdapterView<?> parent, View view, int position, long id) {
        openPlan(plans.get(position));
      }

      @Override
      public void onNothingSelected(AdapterView<?> parent) {}
    });
    send.setOnClickListener(v -> submit());
    cancel.setOnClickListener(v -> cancelRunning());
    serve.setOnCheckedChangeListener((v, on) -> openPlan(plans.get(planPicker.getSelectedItemPosition())));
    voice.setOnCheckedChangeListener((v, on) -> setVoice(on));
  }

  /** Voice mode on the loaded engine (an omni plan that hears): talk, and talk over its replies. */
  private void setVoice(boolean on) {
    if (!on) {
      stopVoice();
      return;
    }
    if (checkSelfPermission(Manifest.permission.RECORD_AUDIO) != PackageManager.PERMISSION_GRANTED) {
      requestPermissions(new String[] {Manifest.permission.RECORD_AUDIO}, 1);
      metrics.setText(R.string.voice_needs_microphone);
      voice.setChecked(false);
      return;
    }
    if (engine == null) {
      voice.setChecked(false);
      return;
    }
    try {
      voiceMode = new VoiceMode(engine, text -> ui.post(() -> {
        reply.append(text);
        scroll.fullScroll(View.FOCUS_DOWN);
      }));
      send.setEnabled(false);  // the engine now holds the conversation
    } catch (RuntimeException e) {  // OmniEdgeException: not an omni plan that hears, or no voice_activity
      metrics.setText(e.getMessage());
      voice.setChecked(false);
    }
  }

  private void stopVoice() {
    final VoiceMode v = voiceMode;
    voiceMode = null;
    if (v != null) engines.execute(v::close);  // waits for a response's cancel: not on the UI thread
    send.setEnabled(engine != null);
  }

  /** The HTP's DSP side loads its skel libraries from these directories (the QNN SDK's rule). */
  private void pointTheDspAtOurLibraries() {
    String dirs = getApplicationInfo().nativeLibraryDir
        + ";/vendor/dsp/cdsp;/vendor/lib/rfsa/adsp;/system/lib/rfsa/adsp;/dsp";
    try {
      Os.setenv("ADSP_LIBRARY_PATH", dirs, true);
    } catch (ErrnoException e) {
      Log.w(TAG, "ADSP_LIBRARY_PATH not set: " + e);
    }
  }

  private void openPlan(File plan) {
    closeEngine();
    if (serve.isChecked()) {
      startServer(plan);
      return;
    }
    final int token = ++openToken;
    send.setEnabled(false);
    metrics.setText(getString(R.string.loading, plan.getParentFile().getName()));
    engines.execute(() -> {
      OmniEdge opened = null;
      String failure = null;
      try {
        opened = OmniEdge.open(plan.getAbsolutePath());  // re-hashes every artifact, then loads
      } catch (OmniEdgeException e) {
        failure = e.getMessage();
      }
      final OmniEdge loaded = opened;
      final String error = failure;
      ui.post(() -> {
        if (token != openToken || isDestroyed()) {  // another plan was picked, or the Activity went away
          if (loaded != null) engines.execute(loaded::close);
          return;
        }
        if (loaded == null) {
          metrics.setText(error);
          return;
        }
        engine = loaded;
        metrics.setText(getString(R.string.loaded, Placement.byStage(loaded.placements())));
        send.setEnabled(true);
      });
    });
  }

  /** The plan behind the OpenAI and OpenPI protocols on this phone's loopback, port 8000. */
  private void startServer(File plan) {
    final int token = ++openToken;
    send.setEnabled(false);
    metrics.setText(getString(R.string.loading, plan.getParentFile().getName()));
    engines.execute(() -> {
      Server started = null;
      String failure = null;
      try {
        started = Server.start(new Server.Config(plan.getAbsolutePath()).port(8000));
      } catch (OmniEdgeException e) {
        failure = e.getMessage();
      }
      final Server running = started;
      final String error = failure;
      ui.post(() -> {
        if (token != openToken || isDestroyed()) {
          if (running != null) engines.execute(running::close);
          return;
        }
        if (running == null) {
          metrics.setText(error);
          return;
        }
        server = running;
        metrics.setText(getString(R.string.serving, running.url()));
      });
    });
  }

  private void submit() {
    String text = prompt.getText().toString().trim();
    if (engine == null || text.isEmpty() || running != null) return;
    reply.setText("");
    // The plan's prebuffer (0 with an adaptive chunk schedule), the same rule as the native clock's.
    final double prebufferMs = Math.max(0, engine.planPrebufferMs());
    final PcmPlayer audio = speak.isChecked() ? new PcmPlayer(prebufferMs) : null;
    player = audio;
    Request request = Request.builder(text).chat(null).prebufferMs(prebufferMs).build();
    final Generation g = engine.submit(request, new StreamListener() {
      @Override
      public void onToken(TokenEvent token) {  // the engine's worker thread: hand the text to the UI
        final String piece = token.text;
        ui.post(() -> {
          reply.append(piece);
          scroll.post(() -> scroll.fullScroll(View.FOCUS_DOWN));
        });
      }

      @Override
      public void onPcm(PcmChunk chunk) {
        if (audio != null) audio.write(chunk);
      }
    });
    running = g;
    setBusy(true);
    Thread waiter = new Thread(() -> {
      Result result = null;
      String failure = null;
      try {
        result = g.await();
      } catch (OmniEdgeException e) {
        failure = e.getMessage();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        failure = "interrupted";
      }
      if (audio != null) audio.finish();
      final Result r = result;
      final String error = failure;
      ui.post(() -> finished(g, r, error, audio));
    }, "omni-edge-result");
    waiter.start();
  }

  private void finished(Generation g, Result result, String error, PcmPlayer audio) {
    if (g != running) return;
    running = null;
    setBusy(false);
    if (error != null) {
      metrics.setText(error);
      return;
    }
    if (result.cancelled()) reply.append(" " + getString(R.string.cancelled));
    String line = result.metrics.toString();
    if (audio != null) line += String.format(Locale.ROOT, " (AudioTrack underruns %d)", audio.underruns());
    metrics.setText(line);
  }

  private void cancelRunning() {
    if (engine != null) engine.cancel();  // every stage stops at its next step; the result says cancelled
    if (player != null) player.cancel();
  }

  private void setBusy(boolean busy) {
    send.setEnabled(!busy && engine != null);
    cancel.setEnabled(busy);
    planPicker.setEnabled(!busy);
  }

  private void closeEngine() {
    if (voiceMode != null) voice.setChecked(false);  // stops it first: it runs on the engine
    cancelRunning();
    running = null;
    final OmniEdge e = engine;
    engine = null;
    if (e != null) engines.execute(e::close);  // waits for the worker: never on the UI thread
    final Server s = server;
    server = null;
    if (s != null) engines.execute(s::close);  // ends its streams and waits for them
  }

  @Override
  protected void onSaveInstanceState(Bundle out) {
    super.onSaveInstanceState(out);
    out.putInt(STATE_PLAN, planPicker.getSelectedItemPosition());
  }

  @Override
  protected void onStop() {
    super.onStop();
    cancelRunning();  // leaving the app (or rotating it) ends what runs
  }

  @Override
  protected void onDestroy() {
    ++openToken;  // a load still in flight closes itself when it lands
    closeEngine();
    super.onDestroy();
  }
}
