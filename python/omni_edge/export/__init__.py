"""omni_edge.export: checkpoints into per-stage graphs (ONNX, ExecuTorch .pte, QNN context binaries)."""
