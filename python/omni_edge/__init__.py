"""omni-edge: on-device Omni-style multi-stage model serving.

Subpackages: `contracts` (the stage contract, Python reference), `native` (the C++
controller through nanobind), `export`, `artifacts`, `harness`, `cli`.
"""

__version__ = "0.3.0"

import os as _os

# ONNX Runtime's POSIX builds write a device id and a telemetry database under ~/.cache unless
# this is set before the library initializes (the native controller sets it too); a user who
# sets it decides. It must come before any `import onnxruntime` of this package.
_os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
