"""omni-edge: on-device Omni-style multi-stage model serving.

Subpackages: `contracts` (the stage contract, Python reference), `native` (the C++
controller through nanobind), `export`, `artifacts`, `harness`, `cli`.
"""

__version__ = "0.3.0"
