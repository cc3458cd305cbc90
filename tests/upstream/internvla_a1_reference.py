"""vLLM-Omni 0.30.0's own InternVLAA1Policy on an observation: the reference the native action
chunk must equal. Runs in the upstream environment (scripts/upstream_env.sh: transformers 4.57,
which vLLM-Omni's Qwen3-VL adapter is written for, and the vllm-omni wheel unpacked, not
installed), not in the project's:

    work/upstream/venv/bin/python tests/upstream/internvla_a1_reference.py CKPT OBS.npz OUT.npz [REPEAT [THREADS]]

REPEAT > 0 (benchmarks/internvla_act.py): the policy runs REPEAT more times after the first and
OUT.npz also holds `timings` (JSON: per run, milliseconds in vLLM-Omni's own methods: the
processor's inputs, embed_prefix (the vision tower), the understanding and generation experts'
forwards, embed_middle (Cosmos), each denoise_step, the whole forward) and the process's peak RSS.

What this run changes around vLLM-Omni's code, and nothing else:
- `vllm.model_executor.models.utils.AutoWeightsLoader`, its one import from vLLM, is a loader
  that copies each named tensor into the parameter of that name (what vLLM's does for a module
  without custom loading) and refuses names it does not know.
- The package's __init__ (which imports the serving pipeline and so vLLM) is not run; the model's
  modules are imported from the wheel's files as they are.
- Sizes: vLLM-Omni fixes them per variant name (Qwen3-VL-2B's 2048-wide decoder, a 24-block
  vision tower, Cosmos CI8x8 at 128 channels). For a checkpoint that declares `omni_edge_sizes`,
  `get_qwen_config`, the vision tower's config and the Cosmos builder are given those sizes.
- Qwen3VLProcessor is built from its image processor and tokenizer, without the video processor
  (which needs torchvision; PyPI's does not import beside this torch; the policy reads images).
- float32 throughout: InternVLAA1Policy.from_pretrained with the checkpoint's dtype float32
  (vLLM-Omni's pipeline would then also cast Cosmos to bfloat16; the policy itself does not).

OBS.npz: task (str), state [S], noise [chunk, max_action_dim], and per camera slot i in 0..2
image{i} [2, 3, H, W] float in [0, 1] (previous frame, current frame) and mask{i} (bool).
OUT.npz: actions [chunk, max_action_dim], and the processor's input_ids, pixel_values."""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import sys
import types
from pathlib import Path

import numpy as np
import torch

PACKAGE = "vllm_omni_internvla_a1"


def _stub_vllm() -> None:
    class AutoWeightsLoader:
        def __init__(self, module: torch.nn.Module, ignore_unexpected_prefixes: list[str] | None = None) -> None:
            self.module = module
            self.ignore = tuple(ignore_unexpected_prefixes or ())

        def load_weights(self, weights: object) -> set[str]:
            params = dict(self.module.named_parameters())
            params.update(dict(self.module.named_buffers()))
            loaded: set[str] = set()
            for name, tensor in weights:  # type: ignore[attr-defined]
                if name.startswith(self.ignore):
                    continue
                target = name
                if name not in params and name.endswith(".lm_head.weight"):  # tied to the embeddings
                    target = name.replace(".lm_head.", ".model.language_model.embed_tokens.")
                if target not in params:
                    raise KeyError(f"unexpected weight {name}")
                with torch.no_grad():
                    params[target].copy_(tensor.to(params[target].dtype))
                loaded.add(name)
            return loaded

    for name in ("vllm", "vllm.model_executor", "vllm.model_executor.models", "vllm.model_executor.models.utils"):
        sys.modules[name] = types.ModuleType(name)
    sys.modules["vllm.model_executor.models.utils"].AutoWeightsLoader = AutoWeightsLoader  # type: ignore[attr-defined]


def _import_upstream(source: Path) -> types.ModuleType:
    package = types.ModuleType(PACKAGE)
    package.__path__ = [str(source)]  # type: ignore[attr-defined]
    sys.modules[PACKAGE] = package
    for name in ("config", "adapter_qwen3_vl", "cosmos_ci_torch", "model_cosmos", "model_internvla_a1"):
        spec = importlib.util.spec_from_file_location(f"{PACKAGE}.{name}", source / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    return sys.modules[f"{PACKAGE}.model_internvla_a1"]


def _processor_without_video(model: types.ModuleType) -> None:
    """What Qwen3VLInputBuilder reads of Qwen3VLProcessor (its image processor, its tokenizer and
    the vision token ids it looks up by name), without the video processor. The image processor is
the slow one (the fast one needs torchvision too), asked for tensors as the fast one gives."""
    from transformers import AutoImageProcessor, AutoTokenizer

    class ImagesOnly:
        @classmethod
        def from_pretrained(cls, path: str, **kwargs: object) -> types.SimpleNamespace:
            tokenizer = AutoTokenizer.from_pretrained(path)
            ids = {f"{name}_token_id": tokenizer.convert_tokens_to_ids(f"<|{token}|>")
                   for name, token in (("image", "image_pad"), ("vision_start", "vision_start"),
                                       ("vision_end", "vision_end"))}
            slow = AutoImageProcessor.from_pretrained(path, use_fast=False)

            def images(*args: object, **kw: object) -> object:  # tensors, as the fast processor returns
                return slow(*args, return_tensors="pt", **kw)

            return types.SimpleNamespace(image_processor=images, tokenizer=tokenizer, **ids)

    model.Qwen3VLProcessor = ImagesOnly


def _resize(model: types.ModuleType, sizes: dict) -> None:
    """The checkpoint's own sizes in place of the variant's fixed ones (see the module's doc)."""
    vlm, expert, vision, cosmos = sizes["vlm"], sizes["expert"], sizes["vision"], sizes["cosmos"]
    qwen_config = model.QwenConfig

    def get_qwen_config(variant: str):
        layers = int(variant.split("_")[-1][:-1])
        d = vlm if variant.startswith("qwen3_vl") else expert
        return qwen_config(d["head_dim"], d["hidden"], d["intermediate"], d["heads"], layers, d["kv_heads"])

    model.get_qwen_config = get_qwen_config
    und_class = model.Qwen3VLForConditionalGeneration

    def und_expert(config):
        v = config.vision_config
        v.depth, v.hidden_size, v.intermediate_size = vision["depth"], vision["hidden"], vision["intermediate"]
        v.num_heads, v.patch_size = vision["heads"], vision["patch"]
        v.num_position_embeddings, v.out_hidden_size = vision["num_position_embeddings"], vlm["hidden"]
        return und_class(config=config)

    model.Qwen3VLForConditionalGeneration = und_expert
    cosmos_module = sys.modules[f"{PACKAGE}.model_cosmos"]
    ci = sys.modules[f"{PACKAGE}.cosmos_ci_torch"]

    def build(spatial_compression: int):
        return ci.ContinuousImageTokenizer(
            attn_resolutions=[32], channels=cosmos["channels"], channels_mult=list(cosmos["channels_mult"]),
            dropout=0.0, in_channels=3, spatial_compression=spatial_compression,
            num_res_blocks=cosmos["num_res_blocks"], out_channels=3, resolution=1024, patch_size=4,
            patch_method="haar", latent_channels=16, z_channels=16, z_factor=1, name="CI")

    cosmos_module.build_cosmos_ci_torch_model = build


def _timed(owner: object, name: str, into: dict[str, list[float]], key: str) -> None:
    """Wraps owner.name so each call's milliseconds are appended to into[key]."""
    import time

    inner = getattr(owner, name)

    def timed(*args: object, **kwargs: object) -> object:
        start = time.perf_counter()
        out = inner(*args, **kwargs)
        into.setdefault(key, []).append(1000 * (time.perf_counter() - start))
        return out

    timed.inner = inner  # type: ignore[attr-defined]
    setattr(owner, name, timed)


def _timed_parts(policy: object, calls: dict[str, list[float]]) -> None:
    """Fresh wrappers on the instance (each run's own dict) of the methods sample_actions calls."""
    model = policy.model  # type: ignore[attr-defined]
    experts = model.qwen3_vl_with_expert
    for owner, name, key in ((policy.input_builder, "build", "preprocess_ms"),  # type: ignore[attr-defined]
                             (model, "embed_prefix", "vision_ms"), (experts.und_expert.language_model, "forward", "prefix_ms"),
                             (model, "embed_middle", "frame_ms"), (experts.gen_expert, "forward", "history_ms"),
                             (model, "denoise_step", "step_ms")):
        previous = owner.__dict__.get(name)
        if previous is not None and hasattr(previous, "inner"):
            setattr(owner, name, previous.inner)  # the previous run's wrapper off
        _timed(owner, name, calls, key)


def main() -> None:
    checkpoint, obs_path, out_path = (Path(a) for a in sys.argv[1:4])
    repeat = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    source = Path(os.environ["VLLM_OMNI_SOURCE"]) / "vllm_omni" / "diffusion" / "models" / "internvla_a1"
    torch.set_num_threads(int(sys.argv[5]) if len(sys.argv) > 5 else 1)
    os.environ["INTERNVLA_A1_PROCESSOR_DIR"] = str(checkpoint / "processor")
    os.environ["INTERNVLA_A1_COSMOS_DIR"] = str(checkpoint / "Cosmos-Tokenizer-CI8x8")
    _stub_vllm()
    model = _import_upstream(source)
    _processor_without_video(model)
    config = json.loads((checkpoint / "config.json").read_text())
    if "omni_edge_sizes" in config:
        _resize(model, config["omni_edge_sizes"])
    policy = model.InternVLAA1Policy.from_pretrained(checkpoint, processor_model_name=str(checkpoint / "processor"),
                                                     strict=True)
    obs = np.load(obs_path)
    batch: dict[str, object] = {"observation.task": str(obs["task"]),
                                "observation.state": torch.from_numpy(obs["state"]).float()[None]}
    for i in range(3):
        batch[f"observation.images.image{i}"] = torch.from_numpy(obs[f"image{i}"]).float()[None]
        batch[f"observation.images.image{i}_mask"] = torch.tensor([bool(obs[f"mask{i}"])])
    noise = torch.from_numpy(obs["noise"]).float()[None]
    captured: dict[str, np.ndarray] = {}
    build = policy.input_builder.build

    def recording_build(images: list, task: str) -> dict:
        got = build(images, task)
        captured.update({k.split(".")[-1]: v.numpy() for k, v in got.items()})
        return got

    policy.input_builder.build = recording_build
    runs: list[dict[str, list[float]]] = []
    for _ in range(repeat + 1):
        calls: dict[str, list[float]] = {}
        if repeat:
            _timed_parts(policy, calls)
        with torch.inference_mode():
            import time

            start = time.perf_counter()
            actions, _ = policy.forward(batch, noise=noise)
            calls["total_ms"] = [1000 * (time.perf_counter() - start)]
        runs.append(calls)
    out = {"actions": actions[0].float().numpy(), **captured}
    if repeat:
        import resource

        out["timings"] = np.array(json.dumps(runs[1:]))
        out["peak_rss_mb"] = np.array(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    tmp = out_path.with_suffix(".tmp.npz")
    np.savez(tmp, **out)
    tmp.replace(out_path)


if __name__ == "__main__":
    main()
