"""omni_edge.harness: contract conformance, devices, profiling and qualification."""
