"""The architecture registry and the target options: a checkpoint's own config.json picks its
architecture, a command that does not take it refuses naming the one that does, and options no
export can honour are refused when they are made, before any work. Nothing here loads a model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from omni_edge.export.options import LlmExportOptions, PolicyExportOptions, TtsExportOptions
from omni_edge.export.registry import ARCHITECTURES, by_name, export_checkpoint, make_checkpoint, of_checkpoint


def _config_only(directory: Path, model_type: str) -> Path:
    directory.mkdir(parents=True)
    # MiniCPM-o's model_type is shared by its generations: 4.5 is told by its version.
    extra = {"version": "4.5"} if model_type == "minicpmo" else {}
    (directory / "config.json").write_text(json.dumps({"model_type": model_type, **extra}))
    return directory


def test_every_architecture_is_found_from_its_model_types(tmp_path: Path) -> None:
    names = [a.name for a in ARCHITECTURES]
    assert names == ["qwen3", "qwen3.5", "qwen2", "llama", "qwen3-tts", "qwen2.5-omni", "minicpmo-4.5", "pi0",
                     "internvla-a1"]
    assert len(set(names)) == len(names)
    for arch in ARCHITECTURES:
        assert by_name(arch.name) is arch and arch.task in ("llm", "tts", "policy") and arch.presets
        for model_type in arch.model_types:
            assert of_checkpoint(_config_only(tmp_path / f"{arch.name}-{model_type}", model_type)) is arch
    known = r"known: qwen3, qwen3_5_text, qwen3_5, qwen2, llama, qwen3_tts"
    with pytest.raises(ValueError, match=rf"model_type 'mistral' is not supported \({known}"):
        of_checkpoint(_config_only(tmp_path / "mistral", "mistral"))
    with pytest.raises(ValueError, match=r"not a checkpoint directory \(no config\.json\)"):
        of_checkpoint(tmp_path / "missing")
    (tmp_path / "garbled").mkdir()
    (tmp_path / "garbled" / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match="not a readable config"):
        of_checkpoint(tmp_path / "garbled")


@pytest.mark.parametrize(("model_type", "opts", "command"), [
    ("pi0", LlmExportOptions(), "export policy"),
    ("qwen3", TtsExportOptions(), "export llm"),
    ("qwen3_tts", PolicyExportOptions(), "export tts"),
    ("qwen2_5_omni_thinker", TtsExportOptions(), "export llm"),
])
def test_a_command_refuses_a_checkpoint_another_takes_by_name(tmp_path: Path, model_type: str, opts: object,
                                                             command: str) -> None:
    checkpoint = _config_only(tmp_path / "ckpt", model_type)
    with pytest.raises(ValueError, match=f"not a .* checkpoint directory: .*`omni-edge {command}`"):
        export_checkpoint(checkpoint, tmp_path / "out", opts)  # type: ignore[arg-type]
    assert not (tmp_path / "out").exists()


def test_make_checkpoint_refuses_what_an_architecture_does_not_take(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"qwen3-tts checkpoints do not take --sliding-window, --train-steps \(qwen3 does\)"):
        make_checkpoint(tmp_path / "a", arch="qwen3-tts", sliding_window=4, train_steps=0)
    with pytest.raises(ValueError, match=r"pi0 checkpoints do not take --thinker \(qwen3-tts does\)"):
        make_checkpoint(tmp_path / "b", arch="pi0", thinker=tmp_path)
    with pytest.raises(ValueError, match="unknown architecture 'mistral'"):
        make_checkpoint(tmp_path / "c", arch="mistral")
    with pytest.raises(ValueError, match="unknown preset 'bench' for pi0"):
        make_checkpoint(tmp_path / "d", arch="pi0", preset="bench")
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize(("fields", "why"), [
    ({"target": "gpu"}, "unknown target 'gpu'"),
    ({"formats": ()}, "at least one format"),
    ({"formats": ("onnx", "tflite")}, "unknown format 'tflite'"),
    ({"socs": ("sm9999",)}, "unknown SoC 'sm9999'"),
    ({"socs": ()}, "at least one SoC"),
    ({"threads": -1}, "--threads takes a whole number from 0 to 1024"),
    ({"precision": "w8a16"}, "--target cpu takes --precision fp32"),
    ({"precision": "int8", "target": "qnn-htp"}, "unknown precision 'int8': --target qnn-htp takes --precision"),
])
def test_target_options_are_checked_once_when_made(fields: dict[str, object], why: str) -> None:
    for options in (LlmExportOptions, TtsExportOptions, PolicyExportOptions):
        with pytest.raises(ValueError, match=why):
            options(**fields)  # type: ignore[arg-type]


def test_each_command_takes_its_precisions_and_defaults() -> None:
    with pytest.raises(ValueError, match="--block-size 24: a power of two"):
        LlmExportOptions(precision="int4", block_size=24)
    assert LlmExportOptions(precision="int4", block_size=64).block_size == 64
    assert LlmExportOptions().precision == ""  # the architecture's default (a thinker's encoders differ)
    assert (TtsExportOptions().precision, TtsExportOptions(target="qnn-htp").precision) == ("fp32", "fp16")
    assert (PolicyExportOptions().precision, PolicyExportOptions(target="qnn-htp").precision) == ("fp32", "fp16")
    assert PolicyExportOptions(target="qnn-htp", precision="w8a16").precision == "w8a16"  # InternVLA-A1's
    for precision, target in (("int8", "cpu"), ("w4a16", "qnn-htp")):
        with pytest.raises(ValueError, match=f"--target {target} takes --precision"):
            PolicyExportOptions(precision=precision, target=target)


def test_the_registry_agrees_with_each_folder() -> None:
    """The registry is the one list the CLI reads without importing a model: each entry's presets
    and model types are the ones its folder's maker and loader use."""
    from omni_edge.export.targets import cpu_quant, qnn_target

    presets = {"qwen3": "PRESETS", "qwen3.5": "PRESETS", "qwen2": "PRESETS", "llama": "PRESETS", "qwen3-tts": "TTS_PRESETS",
               "qwen2.5-omni": "OMNI_PRESETS", "minicpmo-4.5": "PRESETS", "pi0": "PI0_PRESETS",
               "internvla-a1": "INTERNVLA_PRESETS"}
    for arch in ARCHITECTURES:
        assert arch.presets == tuple(getattr(arch.module("checkpoint"), presets[arch.name])), arch.name
    reference = {a.name: a.module("reference") for a in ARCHITECTURES}
    for text in ("qwen3", "qwen3.5", "qwen2", "llama"):
        assert by_name(text).model_types == reference[text].MODEL_TYPES
    assert by_name("qwen3-tts").model_types == (reference["qwen3-tts"].MODEL_TYPE,)
    assert by_name("qwen2.5-omni").model_types == (reference["qwen2.5-omni"].THINKER_TYPE,
                                                   reference["qwen2.5-omni"].RELEASE_TYPE)
    assert by_name("pi0").model_types == (reference["pi0"].PI0_TYPE,)
    assert by_name("internvla-a1").model_types == (by_name("internvla-a1").module("model").TYPE,)
    assert by_name("minicpmo-4.5").model_types == (by_name("minicpmo-4.5").module("config").MODEL_TYPE,)
    assert set(TtsExportOptions.PRECISIONS["cpu"]) == set(cpu_quant.CPU_PRECISIONS)
    assert set(TtsExportOptions.PRECISIONS["qnn-htp"]) == set(qnn_target.PRECISIONS)
