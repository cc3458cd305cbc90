"""omni_edge.export: checkpoints into per-stage graphs (ONNX, ExecuTorch .pte, QNN context
binaries), validated against their reference, with hashed manifests and plans.

    registry.py      the architectures (make-checkpoint --arch, which export command takes a
                     checkpoint), found from the checkpoint's config.json; architecture.py: an entry
    options.py       the target options every export takes (formats, target, precision, SoCs, ...)
    models/<arch>/   one folder per architecture: checkpoint, reference, graphs, onnx, pte, qnn, export
    decoder/         a decoder-only transformer LM (text, the talker's and thinker's bodies) and its
                     targets: the layer the text architectures and two families share
    targets/         ONNX graphs, ExecuTorch programs, QNN context binaries, CPU block quantization
    checkpoint.py, corpus.py   what every make-checkpoint shares (tokenizer, layout, training text)
    comparison.py    SQNR, near ties, greedy agreement: how numbers are compared
    omni.py          joining a thinker plan and a speech plan into one omni plan
"""
