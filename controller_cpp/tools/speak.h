#pragma once

namespace omni_edge::tools {

// omni-edge-run speak --plan PLAN (--text TEXT | --text-ids 1,2,3) --out OUT.wav [--json]
//                     [--max-frames N] [--prebuffer-ms MS] [--temperature T] [--top-k K] [--seed S]
//                     [--threads N] [--allow-unqualified] [--info] [--repeat N]
int Speak(int argc, char** argv, int first);

}  // namespace omni_edge::tools
