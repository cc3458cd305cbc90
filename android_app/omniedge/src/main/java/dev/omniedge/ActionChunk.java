package dev.omniedge;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;

/**
 * A policy's action chunk and what it means: one row of {@link #actionDim} values per step, the
 * dimensions' names and units in order, the time each step is for, and how old the observation
 * was. Robot control and safety belong to the application's controller, not to this object.
 */
public final class ActionChunk {
  public final int schemaVersion;
  private final float[][] actions;
  public final List<String> names;
  public final List<String> units;
  public final double dtMs;
  public final double observationTimestampMs;
  public final double producedMs;
  private final double[] targetTimesMs;
  public final double ageAtStartMs;
  public final double ageAtEmissionMs;
  public final boolean deadlineMissed;
  public final double latenessMs;  // NaN without a deadline
  /** Every field of the event, as parsed JSON (model identity, timings). */
  public final Map<String, Object> fields;

  private ActionChunk(Map<String, Object> e) {
    fields = Collections.unmodifiableMap(e);
    schemaVersion = (int) Json.getLong(e, "schema_version", 0);
    List<Object> rows = Json.getList(e, "actions");
    actions = new float[rows.size()][];
    for (int k = 0; k < rows.size(); ++k) {
      @SuppressWarnings("unchecked")
      List<Object> row = (List<Object>) rows.get(k);
      actions[k] = new float[row.size()];
      for (int i = 0; i < row.size(); ++i) actions[k][i] = ((Number) row.get(i)).floatValue();
    }
    names = strings(Json.getList(e, "action_names"));
    units = strings(Json.getList(e, "action_units"));
    dtMs = Json.getDouble(e, "dt_ms", 0);
    observationTimestampMs = Json.getDouble(e, "observation_timestamp_ms", -1);
    producedMs = Json.getDouble(e, "produced_ms", -1);
    List<Object> times = Json.getList(e, "target_times_ms");
    targetTimesMs = new double[times.size()];
    for (int k = 0; k < times.size(); ++k) targetTimesMs[k] = ((Number) times.get(k)).doubleValue();
    @SuppressWarnings("unchecked")
    Map<String, Object> age = (Map<String, Object>) e.get("observation_age_ms");
    ageAtStartMs = age == null ? Double.NaN : Json.getDouble(age, "at_start", Double.NaN);
    ageAtEmissionMs = age == null ? Double.NaN : Json.getDouble(age, "at_emission", Double.NaN);
    deadlineMissed = Boolean.TRUE.equals(e.get("deadline_missed"));
    latenessMs = Json.getDouble(e, "lateness_ms", Double.NaN);
  }

  static ActionChunk of(Map<String, Object> event) {
    return new ActionChunk(event);
  }

  private static List<String> strings(List<Object> values) {
    List<String> out = new ArrayList<>();
    for (Object v : values) out.add(String.valueOf(v));
    return Collections.unmodifiableList(out);
  }

  public int chunkSize() {
    return actions.length;
  }

  public int actionDim() {
    return actions.length == 0 ? 0 : actions[0].length;
  }

  /** Step k's action values, in the order of {@link #names}. */
  public float[] action(int k) {
    return actions[k].clone();
  }

  /** The time step k is for: the capture time + k dt (ms since the Unix epoch). */
  public double targetTimeMs(int k) {
    return targetTimesMs[k];
  }
}
