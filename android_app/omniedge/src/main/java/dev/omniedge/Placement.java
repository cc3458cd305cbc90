package dev.omniedge;

import java.util.Map;

/** Where one graph of a stage runs, as the runtime reported it when the plan loaded. */
public final class Placement {
  public final long stageId;
  public final String graph;
  public final String backend;
  /** "npu", "gpu" or "cpu": where the graph's nodes actually are. */
  public final String device;
  /** The execution provider or delegate, e.g. "QNNExecutionProvider", "CPUExecutionProvider". */
  public final String engine;
  public final long nodesOnEngine;
  public final long nodesElsewhere;

  Placement(long stageId, String graph, String backend, String device, String engine, long nodesOnEngine,
            long nodesElsewhere) {
    this.stageId = stageId;
    this.graph = graph;
    this.backend = backend;
    this.device = device;
    this.engine = engine;
    this.nodesOnEngine = nodesOnEngine;
    this.nodesElsewhere = nodesElsewhere;
  }

  static Placement fromJson(Map<String, Object> p) {
    return new Placement(Json.getLong(p, "stage_id", -1), Json.getString(p, "graph", ""),
        Json.getString(p, "backend", ""), Json.getString(p, "device", ""), Json.getString(p, "engine", ""),
        Json.getLong(p, "nodes_on_engine", 0), Json.getLong(p, "nodes_elsewhere", 0));
  }

  /** Per stage, the devices its graphs are on: "0:NPU 1:NPU 2:CPU" ("NPU+CPU" if some nodes fell back). */
  public static String byStage(java.util.List<Placement> placements) {
    java.util.TreeMap<Long, java.util.TreeSet<String>> stages = new java.util.TreeMap<>();
    for (Placement p : placements) {
      stages.computeIfAbsent(p.stageId, k -> new java.util.TreeSet<>()).add(
          p.device.toUpperCase(java.util.Locale.ROOT) + (p.nodesElsewhere > 0 ? "+CPU" : ""));
    }
    StringBuilder out = new StringBuilder();
    for (java.util.Map.Entry<Long, java.util.TreeSet<String>> e : stages.entrySet()) {
      if (out.length() > 0) out.append(' ');
      out.append(e.getKey()).append(':').append(String.join("/", e.getValue()));
    }
    return out.toString();
  }

  @Override
  public String toString() {
    return graph + "@" + device.toUpperCase(java.util.Locale.ROOT) + (nodesElsewhere > 0 ? "(+" + nodesElsewhere
        + " elsewhere)" : "");
  }
}
