package dev.omniedge.app;

import java.io.File;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/** The plans `omni-edge push --app` laid out: one directory per push, each with its plan.json. */
final class PlanFiles {
  private PlanFiles() {}

  static List<File> under(File root) {
    List<File> plans = new ArrayList<>();
    File[] dirs = root == null ? null : root.listFiles(File::isDirectory);
    if (dirs == null) return plans;
    Arrays.sort(dirs);
    for (File dir : dirs) {
      File plan = new File(dir, "plan.json");
      if (plan.isFile()) plans.add(plan);
    }
    return plans;
  }
}
