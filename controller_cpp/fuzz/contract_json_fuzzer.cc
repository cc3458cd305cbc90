// libFuzzer target: every native parser of untrusted input — the contract types, manifests and
// validation reports, plans, tokenizer.json, weights indexes, text through the tokenizer, the
// bytes a stream turns into text, a checkpoint's image preprocessing config, WAV files through the
// audio front end, image files through stb_image (and the policies' camera preprocessing), session
// requests (observations among them), OpenAI chat request bodies, realtime session objects, client
// audio through the streaming resampler — must refuse bad input with a
// Status, never crash or leak.
// The first byte picks the parser, so one corpus covers them all.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/pcm.h"
#include "base/unicode/unicode.h"
#include "contract/codec.h"
#include "contract/features.h"
#include "contract/manifest.h"
#include "families/builtin.h"
#include "media/audio_features.h"
#include "media/float_image.h"
#include "media/image_decode.h"
#include "media/image_preprocess.h"
#include "media/stream_resampler.h"
#include "pipeline/request.h"
#include "realtime/realtime_config.h"
#include "runtime/plan.h"
#include "runtime/weights_index.h"
#include "server/openai_chat.h"
#include "server/openai_speech.h"
#ifdef OMNI_EDGE_WITH_OPENPI
#include "server/openpi_wire.h"
#endif
#include "text/tokenizer.h"

namespace {

using omni_edge::Json;

// A contract value of one type: what we write must read back to the same canonical text.
template <int kType>
void FuzzContractValue(const std::string& text) {
  static const char* const kTypes[] = {"buffer", "state", "request", "event", "device"};
  auto canonical = omni_edge::contract::CanonicalJson(kTypes[kType], text);
  if (canonical.ok()) {
    auto again = omni_edge::contract::CanonicalJson(kTypes[kType], canonical.value());
    if (!again.ok() || again.value() != canonical.value()) __builtin_trap();
  }
}

// An image file through stb_image (small ones only, so every input runs fast).
void FuzzImageFile(const std::string& text) {
  auto image = omni_edge::media::DecodeImage(text, 1 << 16);
  if (image.ok() && int64_t(image->pixels.size()) != image->width * image->height * 3) __builtin_trap();
  if (image.ok()) {  // and as a policy's camera: always [3, 32, 32], whatever the aspect ratio
    const float mean[3] = {0.5f, 0.5f, 0.5f}, std_dev[3] = {0.5f, 0.5f, 0.5f};
    auto pixels = omni_edge::media::ResizeWithPad(image.value(), 32, mean, std_dev);
    if (pixels.ok() && pixels->size() != 3 * 32 * 32) __builtin_trap();
    // and as an InternVLA-A1 camera frame: letterboxed to 32 x 32, Qwen3-VL's patches, Cosmos's size
    auto frame = omni_edge::media::ResizeWithPad(omni_edge::media::ToUnitFloat(image.value()), 32, 32);
    if (!frame.ok() || frame->planes.size() != 3 * 32 * 32) __builtin_trap();
    auto patches = omni_edge::media::PatchesOf(*frame, 8, 2, 2, mean, std_dev);
    if (!patches.ok() || patches->values.size() != size_t(16 * 3 * 2 * 8 * 8)) __builtin_trap();
    if (omni_edge::media::ResizeBilinear(*frame, 48, 48).planes.size() != 3 * 48 * 48) __builtin_trap();
  }
}

// A WAV file: decoded, resampled to 16 kHz and turned into log-mel features when short.
void FuzzWavFile(const std::string& text) {
  auto pcm = omni_edge::media::DecodeWav(text);
  if (pcm.ok() && pcm->samples.size() <= 4096) {
    omni_edge::media::AudioFeatureConfig c;
    c.feature_size = 16;
    c.n_samples = 16000;
    auto samples = omni_edge::media::Resample(pcm->samples, pcm->rate, c.sampling_rate);
    if (!samples.ok()) __builtin_trap();  // DecodeWav accepts only rates Resample takes
    auto mel = omni_edge::media::WhisperLogMel(samples.value(), c);
    if (mel.ok() && int64_t(mel->values.size()) != mel->mel * mel->frames) __builtin_trap();
  }
}

// Token bytes to text: always valid UTF-8, and cutting the bytes where a stream
// holds back an unfinished character changes nothing.
void FuzzStreamedText(const std::string& text) {
  const std::string whole = omni_edge::unicode::SanitizeUtf8(text);
  if (!omni_edge::unicode::DecodeUtf8(whole).ok()) __builtin_trap();
  const size_t cut = omni_edge::unicode::CompleteUtf8Prefix(text.substr(0, text.size() / 2));
  const std::string split = omni_edge::unicode::SanitizeUtf8(text.substr(0, cut)) +
                            omni_edge::unicode::SanitizeUtf8(text.substr(cut));
  if (split != whole) __builtin_trap();
}

// A byte-level tokenizer with a few merges and one special token, "<|im_end|>".
omni_edge::Result<std::unique_ptr<omni_edge::text::Tokenizer>> ByteLevelTokenizer() {
  Json vocab = Json::object();
  int next = 0;
  for (int b = 0; b < 256; ++b) {
    const bool direct = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    std::string utf8;
    omni_edge::unicode::AppendUtf8(direct ? char32_t(b) : char32_t(256 + next++), &utf8);
    vocab[utf8] = b;
  }
  vocab["th"] = 256;
  vocab["the"] = 257;
  vocab["\xc4\xa0the"] = 258;
  vocab["\xc4\xa0"] = 32;
  Json j = {
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"t h", "th e", "\xc4\xa0 the"}}}},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"added_tokens", {{{"id", 259}, {"content", "<|im_end|>"}, {"special", true}}}}};
  return omni_edge::text::Tokenizer::FromJson(j);
}

// Arbitrary text through ByteLevelTokenizer(). Byte-level BPE is lossless: decoding
// gives back the NFC form of each segment between added tokens.
void FuzzTokenizerText(const std::string& text) {
  static const auto tokenizer = ByteLevelTokenizer();
  if (!tokenizer.ok()) return;
  auto ids = tokenizer.value()->Encode(text, /*add_special_tokens=*/false);
  if (!ids.ok()) return;
  std::string expected;
  const std::string special = "<|im_end|>";
  size_t start = 0;
  while (true) {
    const size_t hit = text.find(special, start);
    const std::string segment = text.substr(start, hit == std::string::npos ? std::string::npos : hit - start);
    expected += omni_edge::unicode::EncodeUtf8(omni_edge::unicode::Nfc(omni_edge::unicode::DecodeUtf8(segment).value()));
    if (hit == std::string::npos) break;
    expected += special;
    start = hit + special.size();
  }
  if (tokenizer.value()->Decode(ids.value(), /*skip_special=*/false) != expected) __builtin_trap();
}

// The targets below read a JSON value: OnJson parses the input first and stops at bad JSON.
using JsonTarget = void (*)(const Json& j);

template <JsonTarget kTarget>
void OnJson(const std::string& text) {
  auto parsed = omni_edge::ParseJson(text, "fuzz");
  if (parsed.ok()) kTarget(parsed.value());
}

void FuzzArtifactManifest(const Json& j) { (void)omni_edge::contract::ArtifactManifestFromJson(j); }

void FuzzValidationReport(const Json& j) { (void)omni_edge::contract::ValidationReportFromJson(j); }

// A negotiation, and a session request (an observation among its fields): what it
// holds is what it says.
void FuzzSessionRequest(const Json& j) {
  if (j.is_object() && j.contains("protocol_version") && j.contains("required_features")) {
    (void)omni_edge::contract::Negotiate(j["protocol_version"], j["required_features"]);
  }
  auto request = omni_edge::pipeline::RequestFromJson(j);
  if (request.ok() && request->observation) {
    const auto& o = *request->observation;
    int64_t n = o.noise_shape.empty() ? 0 : 1;
    for (int64_t d : o.noise_shape) n *= d;
    if (n != int64_t(o.noise.size()) || !omni_edge::pipeline::Validate(request.value()).ok()) __builtin_trap();
  }
}

void FuzzPlan(const Json& j) { (void)omni_edge::ParsePlan(j, "/nonexistent-fuzz-base", omni_edge::families::Builtin()); }

// A tokenizer.json, then a fixed text through it.
void FuzzTokenizerJson(const Json& j) {
  auto tokenizer = omni_edge::text::Tokenizer::FromJson(j);
  if (tokenizer.ok()) (void)tokenizer.value()->Encode("Hello, world! 東京 🚀 'll 123\n\n  x", /*add_special_tokens=*/true);
}

// A weights index never names bytes outside its component or its data file.
void FuzzWeightsIndex(const Json& j) {
  auto index = omni_edge::ParseWeightsIndex(j, "/fuzz/component/weights.json", 4096);
  if (!index.ok()) return;
  if (index->data_path.parent_path() != "/fuzz/component") __builtin_trap();  // never outside
  for (const auto& t : index->tensors) {
    if (t.offset + t.nbytes > 4096) __builtin_trap();
  }
}

// A checkpoint's image preprocessing config, then a small image through it.
void FuzzVisionPreprocessing(const Json& j) {
  auto p = omni_edge::media::VisionPreprocessingFromJson(j, "preprocessor_config");
  if (p.ok() && p->max_pixels <= (1 << 16)) {  // small enough to run on every input
    const omni_edge::media::RgbImage image{7, 5, std::vector<uint8_t>(7 * 5 * 3, 200)};
    auto patches = omni_edge::media::PreprocessImage(image, p.value());
    if (patches.ok() && int64_t(patches->values.size()) != patches->grid_t * patches->grid_h * patches->grid_w * patches->patch_dim) {
      __builtin_trap();
    }
  }
}

// An OpenAI chat request body, as a client sends it over HTTP (small media limits: fast inputs).
void FuzzChatCompletion(const std::string& text) {
  omni_edge::server::ChatLimits limits;
  limits.max_media_bytes = 4096;
  auto r = omni_edge::server::ParseChatCompletion(text, limits);
  if (r.ok() && (r->messages.empty() || r->media.size() > limits.max_media)) __builtin_trap();
  if (!r.ok()) omni_edge::server::ErrorParam(r.status());
}

// An OpenAI speech request body.
void FuzzSpeech(const std::string& text) {
  auto r = omni_edge::server::ParseSpeech(text, 256);
  if (r.ok() && (r->input.empty() || r->input.size() > 256)) __builtin_trap();
  if (!r.ok()) omni_edge::server::ErrorParam(r.status());
}

// An OpenPI observation frame (msgpack, openpi's numpy arrays), where the server is built.
void FuzzObservation(const std::string& frame) {
#ifdef OMNI_EDGE_WITH_OPENPI
  omni_edge::server::OpenPiLimits limits;
  limits.max_side = 64;
  auto r = omni_edge::server::ParseObservation(frame, limits);
  if (r.ok() && r->images.size() > limits.max_images) __builtin_trap();
  if (r.ok() && r->noise.size() != size_t(r->noise_rows * r->noise_cols)) __builtin_trap();
#else
  (void)frame;
#endif
}

// A realtime session object (session.update): applied whole or not at all, and what the server
// sends back in session.updated reads back to the same settings.
void FuzzRealtimeSession(const Json& j) {
  omni_edge::realtime::RealtimeConfig c;
  if (!omni_edge::realtime::ApplySession(j, &c).ok()) return;
  omni_edge::realtime::RealtimeConfig again;
  const Json object = omni_edge::realtime::SessionObject(c, "sess", "m");
  if (!omni_edge::realtime::ApplySession(object, &again).ok()) __builtin_trap();
  if (omni_edge::realtime::SessionObject(again, "sess", "m") != object) __builtin_trap();
}

// Client audio (16-bit samples) resampled as a stream, cut where the first byte says: the same
// samples as the whole signal resampled at once.
void FuzzStreamResampler(const std::string& text) {
  if (text.size() < 3) return;
  static const int64_t kRates[4] = {8000, 16000, 24000, 44100};
  const int64_t rate = kRates[uint8_t(text[0]) % 4];
  const std::vector<float> x = omni_edge::DecodePcm16(text.substr(1));
  auto whole = omni_edge::media::Resample(x, rate, 16000);
  auto stream = omni_edge::media::StreamResampler::Create(rate, 16000);
  if (!whole.ok() || !stream.ok()) __builtin_trap();
  const size_t cut = x.empty() ? 0 : size_t(uint8_t(text[0])) % (x.size() + 1);
  std::vector<float> got = stream->Push(x.data(), cut);
  const std::vector<float> rest = stream->Push(x.data() + cut, x.size() - cut), tail = stream->Finish();
  got.insert(got.end(), rest.begin(), rest.end());
  got.insert(got.end(), tail.begin(), tail.end());
  if (got != whole.value()) __builtin_trap();
}

// The target of each first byte (modulo 21); scripts/fuzz.sh seeds every one.
using Target = void (*)(const std::string& text);
constexpr Target kTargets[21] = {
    /* 0 */ FuzzContractValue<0>,  // buffer
    /* 1 */ FuzzContractValue<1>,  // state
    /* 2 */ FuzzContractValue<2>,  // request
    /* 3 */ FuzzContractValue<3>,  // event
    /* 4 */ FuzzContractValue<4>,  // device
    /* 5 */ OnJson<FuzzArtifactManifest>,
    /* 6 */ OnJson<FuzzValidationReport>,
    /* 7 */ OnJson<FuzzSessionRequest>,
    /* 8 */ OnJson<FuzzPlan>,
    /* 9 */ OnJson<FuzzTokenizerJson>,
    /* 10 */ FuzzTokenizerText,
    /* 11 */ OnJson<FuzzWeightsIndex>,
    /* 12 */ FuzzStreamedText,
    /* 13 */ OnJson<FuzzVisionPreprocessing>,
    /* 14 */ FuzzWavFile,
    /* 15 */ FuzzImageFile,
    /* 16 */ FuzzChatCompletion,
    /* 17 */ FuzzSpeech,
    /* 18 */ FuzzObservation,
    /* 19 */ OnJson<FuzzRealtimeSession>,
    /* 20 */ FuzzStreamResampler,
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  kTargets[data[0] % 21](std::string(reinterpret_cast<const char*>(data + 1), size - 1));
  return 0;
}
