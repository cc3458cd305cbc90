"""The controller's counter-based noise (controller_cpp/base/counter_noise.h), in numpy: value i of
a stream is SplitMix64's output mixed from seed + (i + 1) * golden gamma, so any slice of a stream
can be computed on its own, on any machine, and equal the device's draws. Uniforms take the top 53
bits; a normal takes two consecutive values (Box-Muller, the cosine branch). Python uses it to
feed a reference exactly the noise the native stage drew (HiFT's source noise)."""

from __future__ import annotations

import numpy as np

_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def _mix(counter: np.ndarray) -> np.ndarray:
    z = counter.copy()
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    out: np.ndarray = z ^ (z >> np.uint64(31))
    return out


def uniform(seed: int, start: int, n: int) -> np.ndarray:
    """Values start .. start + n - 1 of the stream as float64 in [0, 1)."""
    with np.errstate(over="ignore"):
        index = np.arange(start + 1, start + n + 1, dtype=np.uint64)
        z = _mix(np.uint64(seed) + index * _GAMMA)
    return (z >> np.uint64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)


def normal(seed: int, start: int, n: int) -> np.ndarray:
    """n standard normals from values start .. start + 2n - 1 (float32)."""
    u = uniform(seed, start, 2 * n).reshape(n, 2)
    return (np.sqrt(-2.0 * np.log(1.0 - u[:, 0])) * np.cos(2.0 * np.pi * u[:, 1])).astype(np.float32)
