"""omni-edge: on-device Omni-style multi-stage model serving.

One package root, in layers (each imports only the ones before it; scripts/check_python.py):
`files`, `interrupt`, `socs`, `source_tree` (base) -> `contracts` (the stage contract, Python reference) ->
`artifacts` (manifests and reports) -> `runtime` (the C++ controller through nanobind) ->
`export`, `harness` -> `cli`.
"""

__version__ = "0.3.0"

import os as _os
import sys as _sys

if _os.path.basename(_sys.argv[0]) == "omni-edge":
    # The CLI cancels cleanly on SIGINT/SIGTERM/SIGHUP from here on, the imports included
    # (omni_edge/interrupt.py); only the interpreter's own start-up is left to the default action.
    from omni_edge.interrupt import GUARD as _GUARD
    from omni_edge.interrupt import GUARDED_COMMANDS as _GUARDED

    if _sys.argv[1:2] and _sys.argv[1] in _GUARDED:
        _GUARD.install()

# ONNX Runtime's POSIX builds write a device id and a telemetry database under ~/.cache unless
# this is set before the library initializes (the native controller sets it too); a user who
# sets it decides. It must come before any `import onnxruntime` of this package.
_os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
