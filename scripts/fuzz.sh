#!/usr/bin/env bash
# Build the libFuzzer target for the native JSON decoding (clang, ASan + UBSan), seed it with
# every value in the contract fixtures, and run it for SECONDS (default 60).
#   OMNI_EDGE_FUZZ_BUILD  an already configured clang build tree with OMNI_EDGE_BUILD_FUZZERS=ON
#                         (scripts/test.sh passes its ASan tree: one compile for both)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
export PATH="$PWD/.venv/bin:$PATH"
build=${OMNI_EDGE_FUZZ_BUILD:-build/fuzz}
if [ "$build" = build/fuzz ]; then
  # -O1 with line tables only (libFuzzer's usual build; stack traces still name the line) and a
  # unity build (sources compiled in batches): 299 s of CPU against 580 file by file.
  CC=clang CXX=clang++ cmake -S . -B build/fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" -DCMAKE_UNITY_BUILD=ON \
    -DOMNI_EDGE_BUILD_TESTS=OFF -DOMNI_EDGE_BUILD_FUZZERS=ON -DOMNI_EDGE_SANITIZE=address,undefined \
    -DOMNI_EDGE_WITH_ONNXRUNTIME=OFF -DOMNI_EDGE_WITH_EXECUTORCH=OFF >/dev/null
fi
cmake --build "$build" -j2 --target contract_json_fuzzer
corpus=$build/corpus
mkdir -p "$corpus"
python3 - "$corpus" <<'PY'
import hashlib, json, pathlib, sys
out = pathlib.Path(sys.argv[1])
selector = {"buffer": 0, "state": 1, "request": 2, "event": 3, "device": 4}
def seed(sel, value):
    data = bytes([sel]) + json.dumps(value).encode()
    (out / hashlib.sha1(data).hexdigest()).write_bytes(data)
for path in pathlib.Path("tests/fixtures/contract").glob("*.json"):
    fixture = json.loads(path.read_text())
    for case in fixture.get("decode_cases", []):
        seed(selector[case["type"]], case["value"])
    if "request" in fixture:
        seed(2, fixture["request"])
    for event in fixture.get("events", []):
        seed(3, event)
    for case in fixture.get("negotiation_cases", []):
        seed(7, {"protocol_version": case["version"], "required_features": case.get("required", [])})
from omni_edge.harness.conformance import DEFAULT_ARTIFACT, default_report  # the venv's python (test.sh's PATH)
seed(5, {"schema_version": 2, "component": "llm.decode", "files": {"numerical.json": "0" * 64, "task.json": "1" * 64},
         "metadata": {"artifact": DEFAULT_ARTIFACT, "qnn": {"htp_arch": "v79"}}})
seed(6, default_report("numerical"))
for text in ["Hello, world! the the", "東京 🚀 naïve e\u0301 <|im_end|>x", "  \n\n\tindent 123 'll"]:
    data = bytes([10]) + text.encode()
    (out / hashlib.sha1(data).hexdigest()).write_bytes(data)
seed(9, {"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]},
         "pre_tokenizer": {"type": "ByteLevel", "use_regex": True}})
seed(6, default_report("task"))
seed(11, {"file": "weights.bin", "alignment": 64, "tensors": [
    {"name": "w", "dtype": "float32", "shape": [4, 8], "offset": 0, "nbytes": 128},
    {"name": "b", "dtype": "float32", "shape": [8], "offset": 128, "nbytes": 32}], "graphs": {"decode.onnx": ["w", "b"]}})
seed(11, {"file": "../other/weights.bin", "alignment": 64, "tensors": [], "graphs": {}})
for raw in [b"ab\xe7\x90\x10cd", b"\xf0\x9f\x98\x80\xf0\x9f", b"\xed\xa0\x80\xc0\xaf\xe0\x80\xf4\x90"]:
    (out / hashlib.sha1(bytes([12]) + raw).hexdigest()).write_bytes(bytes([12]) + raw)
decoder = {"hidden_size": 8, "num_layers": 1, "num_kv_heads": 1, "head_dim": 8, "vocab_size": 7, "prefill_chunk": 2,
           "mask_value": -100, "kv": {"mode": "full", "buckets": [8], "overflow": "refuse"}}
talker = {"tokenizer": "t.json", "text_pad_id": 1, "code_groups": 2, "codebook_size": 4,
          "codec_ids": {"pad": 4, "bos": 5, "eos": 6}, "min_frames": 2,
          "prompt": {"head": [[1, -1], [2, 5]], "text_codec": 4, "tail": [[1, 5]], "frame_text": 1},
          "decoder": decoder, "predictor": {**decoder, "vocab_size": 4, "prefill_chunk": 1,
                                            "kv": {"mode": "full", "buckets": [2]}}}
seed(8, {"plan_version": 1, "name": "speech", "stages": [
    {"stage_id": 0, "model_stage": "talker", "execution_type": "llm_ar", "input_sources": [],
     "engine_output_type": "codes", "artifact": "/", "talker": talker, "graphs": {}}]})  # "/" exists: parsing goes on
policy = {"tokenizer": "t.json", "cameras": ["base", "wrist"], "image_size": 32, "image_tokens": 4, "hidden_size": 8,
          "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5], "prompt_tokens": 8, "bos_id": 2,
          "image_token_id": 9, "prompt_suffix": "\n", "state_dim": 4, "action_dim": 2, "chunk_size": 3, "num_steps": 10,
          "layers": 1, "kv_heads": 1, "head_dim": 4, "mask_value": -65504, "rope_inv_freq": [1, 0.01],
          "expert_rope_inv_freq": [1, 0.01], "time_freq": [1570.8, 1.57], "max_observation_age_ms": 500,
          "actions": {"schema_version": 1, "names": ["x", "y"], "units": ["m", "m"], "dt_ms": 20}, "identity": {}}
seed(8, {"plan_version": 1, "name": "policy", "stages": [
    {"stage_id": 0, "model_stage": "policy", "execution_type": "llm_generation", "input_sources": [], "final_output": True,
     "final_output_type": "action", "artifact": "/", "policy": policy, "graphs": {}}]})
internvla = {"tokenizer": "t.json", "cameras": ["front", "wrist"], "camera_slots": 3, "history": 2,
             "image_resolution": [32, 32], "patch": 8, "merge": 2, "temporal_patch": 2, "image_tokens": 4,
             "prompt_tokens": 4, "image_token_id": 9, "vision_start_id": 7, "vision_end_id": 8, "pad_id": 0,
             "cosmos_size": 16, "frame_rows": 1, "vlm_hidden": 8, "expert_hidden": 4, "layers": 1, "kv_heads": 1,
             "head_dim": 4, "chunk_size": 3, "max_state_dim": 4, "max_action_dim": 2, "state_dim": 3, "action_dim": 2,
             "num_steps": 10, "mask_value": -65504, "rope_inv_freq": [1, 0.01], "mrope_section": [24, 20, 20],
             "time_scaling": [1570.8, 1.57], "max_observation_age_ms": 500, "max_history_gap_ms": 2000,
             "action_mode": "delta", "identity": {},
             "actions": {"schema_version": 1, "names": ["x", "y"], "units": ["m", "m"], "dt_ms": 20}}
seed(8, {"plan_version": 1, "name": "internvla", "stages": [
    {"stage_id": 0, "model_stage": "policy", "execution_type": "llm_generation", "input_sources": [], "final_output": True,
     "final_output_type": "action", "artifact": "/", "internvla": internvla, "graphs": {}}]})
seed(7, {"prompt": "pick", "deadline_ms": 50, "observation": {
    "timestamp_ms": 1764900000000.5, "images": [{"camera": "base", "path": "a.png"}], "state": [0.1, -2],
    "noise": [[0.5, 1], [2, 3], [-1, 0]], "noise_seed": 3, "reset_history": True}})
seed(8, {"plan_version": 1, "name": "voice", "stages": [
    {"stage_id": 0, "model_stage": "policy", "execution_type": "llm_generation", "input_sources": [], "final_output": True,
     "final_output_type": "action", "artifact": "/", "internvla": internvla, "graphs": {}}], "voice_activity": {"artifact": "/", "graphs": {
    "vad": {"backend": "onnxruntime", "device": "cpu", "graphs": {"frame": "silero_vad.onnx"}}}}})
seed(19, {"type": "realtime", "instructions": "Be brief.", "output_modalities": ["audio"], "max_output_tokens": 64,
          "audio": {"input": {"format": {"type": "audio/pcm", "rate": 24000},
                              "turn_detection": {"type": "server_vad", "threshold": 0.6, "silence_duration_ms": 300}},
                    "output": {"format": {"type": "audio/pcm", "rate": 24000}, "voice": "default"}}})
seed(19, {"modalities": ["text"], "input_audio_format": "pcm16", "turn_detection": None, "max_output_tokens": "inf"})
seed(13, {"patch_size": 14, "merge_size": 2, "temporal_patch_size": 2, "min_pixels": 3136, "max_pixels": 50176,
          "image_mean": [0.48, 0.45, 0.40], "image_std": [0.26, 0.26, 0.27], "rescale_factor": 0.00392156862745098})
seed(13, {"size": {"shortest_edge": 65536, "longest_edge": 16777216}, "patch_size": 16, "image_mean": [0.5, 0.5, 0.5]})
import struct  # noqa: E402


def wav(fmt: int, channels: int, rate: int, bits: int, data: bytes, extensible: bool = False) -> None:
    size = 40 if extensible else 16
    block = channels * bits // 8
    body = struct.pack("<HHIIHH", 0xFFFE if extensible else fmt, channels, rate, rate * block, block, bits)
    if extensible:
        body += struct.pack("<HHI", 22, bits, 0) + struct.pack("<H", fmt) + bytes(14)
    raw = b"WAVE" + b"fmt " + struct.pack("<I", size) + body + b"data" + struct.pack("<I", len(data)) + data
    blob = bytes([14]) + b"RIFF" + struct.pack("<I", len(raw)) + raw
    (out / hashlib.sha1(blob).hexdigest()).write_bytes(blob)


wav(1, 1, 8000, 16, struct.pack("<100h", *[(i * 331) % 20000 - 10000 for i in range(100)]))
wav(3, 2, 44100, 32, struct.pack("<64f", *[((i % 7) - 3) / 4 for i in range(64)]))
wav(1, 1, 22050, 24, bytes(range(90)), extensible=True)


def png(width: int, height: int, rows: bytes) -> None:
    import zlib

    def chunk(tag: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + tag + body + struct.pack(">I", zlib.crc32(tag + body))

    blob = bytes([15]) + b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)) + \
        chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")
    (out / hashlib.sha1(blob).hexdigest()).write_bytes(blob)


png(2, 2, b"\x00" + bytes([255, 0, 0, 0, 255, 0]) + b"\x00" + bytes([0, 0, 255, 10, 20, 30]))
png(3, 1, b"\x01" + bytes(range(9)))
bmp = b"BM" + struct.pack("<IHHI", 70, 0, 0, 54) + struct.pack("<IiiHHIIiiII", 40, 2, 2, 1, 24, 0, 16, 0, 0, 0, 0)
(out / hashlib.sha1(bytes([15]) + bmp + bytes(16)).hexdigest()).write_bytes(bytes([15]) + bmp + bytes(16))


def mp(v: object) -> bytes:
    """msgpack of what an OpenPI seed holds (short maps, lists, strings, bytes as bin, small ints, floats)."""
    if isinstance(v, dict):
        return bytes([0x80 | len(v)]) + b"".join(mp(k) + mp(x) for k, x in v.items())
    if isinstance(v, list):
        return bytes([0x90 | len(v)]) + b"".join(mp(x) for x in v)
    if isinstance(v, str):
        return bytes([0xA0 | len(v.encode())]) + v.encode()
    if isinstance(v, bytes):
        return bytes([0xC4, len(v)]) + v
    if v is True:
        return b"\xc3"
    if isinstance(v, int):
        return bytes([v])
    return b"\xcb" + struct.pack(">d", v)


def nd(data: bytes, dtype: str, shape: list[int]) -> dict[bytes, object]:
    return {b"__ndarray__": True, b"data": data, b"dtype": dtype, b"shape": shape}


for obs in ({"images": {"base": nd(bytes(range(12)), "|u1", [2, 2, 3]), "wrist": nd(bytes(12), "|u1", [3, 2, 2])},
             "state": nd(struct.pack("<2f", 0.5, -1), "<f4", [2]), "prompt": "pick", "timestamp_ms": 1.7649e12,
             "noise": nd(struct.pack("<6f", *range(6)), "<f4", [3, 2])},
            {"endpoint": "reset"}, {"state": [1, 2.5], "seed": 7, "session_id": "s"}):
    blob = bytes([18]) + mp(obs)
    (out / hashlib.sha1(blob).hexdigest()).write_bytes(blob)
PY
for body in '{"model": "m", "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}], "stream": true, "stream_options": {"include_usage": true}, "max_tokens": 8, "stop": ["a"], "temperature": 0.5, "seed": 3}' \
            '{"model": "m", "modalities": ["text", "audio"], "audio": {"format": "wav", "voice": "v"}, "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}, {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}, {"type": "text", "text": "x"}]}]}'; do
  printf '\x10%s' "$body" > "$corpus/chat-$(printf '%s' "$body" | sha1sum | cut -c1-12)"
done
for body in '{"model": "m", "input": "Hello", "voice": "default", "response_format": "wav", "speed": 1.0}' \
            '{"model": "m", "input": "Hi", "voice": {"id": "v"}, "response_format": "pcm", "stream_format": "sse", "max_new_tokens": 4}'; do
  printf '\x11%s' "$body" > "$corpus/speech-$(printf '%s' "$body" | sha1sum | cut -c1-12)"
done
python3 - "$corpus" <<'PY'  # client audio for the streaming resampler (target 20): a tone at each rate's selector
import hashlib, math, pathlib, struct, sys
for sel in (20, 21, 22, 23):  # first byte modulo 4 picks the rate, and the cut
    pcm = b"".join(struct.pack("<h", int(12000 * math.sin(0.05 * i))) for i in range(700))
    blob = bytes([sel]) + pcm
    (pathlib.Path(sys.argv[1]) / hashlib.sha1(blob).hexdigest()).write_bytes(blob)
PY
cp controller_cpp/fuzz/regressions/* "$corpus"/  # inputs that once crashed it: run them every time
echo "fuzzing the native parsers for ${seconds}s ($(ls "$corpus" | wc -l) seeds)"
log=$build/fuzz.log
if ! "$build/controller_cpp/contract_json_fuzzer" -max_total_time="$seconds" -max_len=4096 -timeout=10 \
    -artifact_prefix="$build/" -dict=controller_cpp/fuzz/contract_json.dict -print_final_stats=1 "$corpus" >"$log" 2>&1; then
  tail -n 60 "$log"
  echo "fuzz: FAILED (crash input saved beside the log)" >&2
  exit 1
fi
grep -E "^Done|stat::(number_of_executed_units|new_units_added|peak_rss_mb)" "$log"
