"""Spoken input with known boundaries for the tests: the duplex workload's (espeak-ng)."""

from omni_edge.harness.profiling.spoken import Utterance, espeak, spoken, white_noise

__all__ = ["Utterance", "espeak", "spoken", "white_noise"]
