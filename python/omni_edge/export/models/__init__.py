"""One folder per model architecture, each with the same files where it has them:
    __init__.py    ARCHITECTURE: its registry entry (export/registry.py lists them all)
    checkpoint.py  make_checkpoint: a local checkpoint of the architecture (make-checkpoint)
    reference.py   the PyTorch/transformers reference every artifact is checked against
    graphs.py      the per-stage graphs (torch modules with static shapes)
    onnx.py, pte.py, qnn.py   one module per target (ONNX Runtime, ExecuTorch, QNN HTP)
    plan.py        its plan stages and components, written by every target's module
    export.py      export: picks the target's module, validates, writes manifests and plans
The options are the export command's (export/options.py), shared by the architectures of a kind.
A text decoder (qwen3) builds on the shared export/decoder/ instead of graphs and targets of its
own. A family imports the shared layers (export/*.py, decoder/, targets/), never another family."""
