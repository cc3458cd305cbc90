#include "media/audio_features.h"

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstring>
#include <numeric>

#include <kissfft/kissfft.hh>

#include "media/stream_resampler.h"

namespace omni_edge::media {
namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr int64_t kMaxRate = kMaxSampleRate;
constexpr int64_t kMaxWindowSeconds = 3600;  // the longest n_samples taken, in seconds

// Slaney's mel scale (librosa's default, WhisperFeatureExtractor's).
double HertzToMel(double f) {
  const double logstep = 27.0 / std::log(6.4);
  return f >= 1000.0 ? 15.0 + std::log(f / 1000.0) * logstep : 3.0 * f / 200.0;
}
double MelToHertz(double m) {
  const double logstep = std::log(6.4) / 27.0;
  return m >= 15.0 ? 1000.0 * std::exp(logstep * (m - 15.0)) : 200.0 * m / 3.0;
}

// [mel][bin] triangular filters between 0 Hz and half the rate, Slaney-normalized (equal area).
std::vector<std::vector<double>> MelFilters(int64_t mel, int64_t bins, int64_t rate) {
  const double lo = HertzToMel(0.0), hi = HertzToMel(double(rate / 2));
  std::vector<double> edges(static_cast<size_t>(mel + 2));
  for (int64_t i = 0; i < mel + 2; ++i) edges[size_t(i)] = MelToHertz(lo + (hi - lo) * double(i) / double(mel + 1));
  std::vector<std::vector<double>> filters(static_cast<size_t>(mel), std::vector<double>(static_cast<size_t>(bins)));
  for (int64_t m = 0; m < mel; ++m) {
    const double left = edges[size_t(m)], centre = edges[size_t(m + 1)], right = edges[size_t(m + 2)];
    const double norm = 2.0 / (right - left);
    for (int64_t k = 0; k < bins; ++k) {
      const double f = double(rate / 2) * double(k) / double(bins - 1);
      const double down = (f - left) / (centre - left), up = (right - f) / (right - centre);
      filters[size_t(m)][size_t(k)] = std::max(0.0, std::min(down, up)) * norm;
    }
  }
  return filters;
}

}  // namespace

Result<std::vector<float>> Resample(const std::vector<float>& x, int64_t rate, int64_t target) {
  OE_ASSIGN_OR_RETURN(StreamResampler stream, StreamResampler::Create(rate, target));
  if (rate == target || x.empty()) return x;
  std::vector<float> y = stream.Push(x.data(), x.size());
  const std::vector<float> rest = stream.Finish();
  y.insert(y.end(), rest.begin(), rest.end());
  return y;
}

Result<AudioFeatureConfig> AudioFeaturesFromJson(const Json& config, const std::string& where) {
  if (!config.is_object()) return Status::Error("invalid_field", where + ": must be an object");
  AudioFeatureConfig c;
  OE_ASSIGN_OR_RETURN(c.feature_size, GetInt(config, "feature_size", c.feature_size, where));
  OE_ASSIGN_OR_RETURN(c.sampling_rate, GetInt(config, "sampling_rate", c.sampling_rate, where));
  OE_ASSIGN_OR_RETURN(c.hop_length, GetInt(config, "hop_length", c.hop_length, where));
  OE_ASSIGN_OR_RETURN(c.n_fft, GetInt(config, "n_fft", c.n_fft, where));
  OE_ASSIGN_OR_RETURN(c.n_samples, GetInt(config, "n_samples", c.n_samples, where));
  if (c.feature_size < 1 || c.feature_size > 512) return Status::Error("invalid_field", where + ".feature_size: must be in [1, 512]");
  if (c.sampling_rate < 1000 || c.sampling_rate > kMaxRate) return Status::Error("invalid_field", where + ".sampling_rate: out of range");
  if (c.n_fft < 4 || c.n_fft > 8192 || c.n_fft % 2) return Status::Error("invalid_field", where + ".n_fft: an even size in [4, 8192]");
  if (c.hop_length < 1 || c.hop_length > c.n_fft) return Status::Error("invalid_field", where + ".hop_length: must be in [1, n_fft]");
  // The window only says where the padded computation ends: memory and time follow the audio's
  // own length (WhisperLogMel computes the frames that overlap it). Releases ship 30 s (Whisper)
  // and 300 s (Qwen2.5-Omni, Qwen3-Omni: n_samples 4,800,000); an hour bounds the arithmetic.
  if (c.n_samples < c.n_fft || c.n_samples > kMaxWindowSeconds * c.sampling_rate) {
    return Status::Error("invalid_field", where + ".n_samples: must be in [n_fft, " + std::to_string(kMaxWindowSeconds) +
                                              " s of samples]");
  }
  return c;
}

Result<LogMel> WhisperLogMel(const std::vector<float>& samples, const AudioFeatureConfig& c) {
  const int64_t n = int64_t(samples.size()), N = c.n_fft, pad = N / 2, bins = N / 2 + 1;
  if (n < 1) return Status::Error("invalid_media", "the audio has no samples");
  if (n > c.n_samples) {
    return Status::Error("invalid_media", "the audio is longer than the encoder's window of " +
                                              std::to_string(c.n_samples / c.sampling_rate) + " s");
  }
  // The padded window with reflect padding at both ends; frames that see only padding hold
  // zero power (their log is the floor), so only the frames that overlap the audio are computed.
  const int64_t total = c.n_samples, all_frames = total / c.hop_length;  // the last STFT frame is dropped
  const int64_t computed = std::min(all_frames, (n + pad) / c.hop_length + 1);
  auto at = [&](int64_t i) -> double {  // the padded signal's sample i (of total + 2 pad)
    int64_t k = i - pad;
    if (k < 0) k = -k;
    if (k >= total) k = 2 * (total - 1) - k;
    return k < n ? double(samples[size_t(k)]) : 0.0;
  };
  std::vector<double> window(static_cast<size_t>(N));
  for (int64_t i = 0; i < N; ++i) window[size_t(i)] = 0.5 - 0.5 * std::cos(2.0 * kPi * double(i) / double(N));
  const auto filters = MelFilters(c.feature_size, bins, c.sampling_rate);
  kissfft<double> fft(static_cast<size_t>(N / 2), false);
  std::vector<double> frame(static_cast<size_t>(N)), power(static_cast<size_t>(bins));
  std::vector<std::complex<double>> spectrum(static_cast<size_t>(N / 2 + 1));
  std::vector<double> logmel(static_cast<size_t>(c.feature_size * computed));
  double peak = std::log10(1e-10);  // the padding frames' value
  for (int64_t f = 0; f < computed; ++f) {
    for (int64_t i = 0; i < N; ++i) frame[size_t(i)] = at(f * c.hop_length + i) * window[size_t(i)];
    fft.transform_real(frame.data(), spectrum.data());
    // transform_real packs the Nyquist bin's real part into bin 0's imaginary part.
    power[0] = spectrum[0].real() * spectrum[0].real();
    power[size_t(N / 2)] = spectrum[0].imag() * spectrum[0].imag();
    for (int64_t k = 1; k < N / 2; ++k) power[size_t(k)] = std::norm(spectrum[size_t(k)]);
    for (int64_t m = 0; m < c.feature_size; ++m) {
      const auto& w = filters[size_t(m)];
      double e = 0;
      for (int64_t k = 0; k < bins; ++k) e += w[size_t(k)] * power[size_t(k)];
      const double v = std::log10(std::max(e, 1e-10));
      logmel[size_t(m * computed + f)] = v;
      peak = std::max(peak, v);
    }
  }
  LogMel out;
  out.mel = c.feature_size;
  out.frames = std::min(all_frames, (n + c.hop_length - 1) / c.hop_length);  // the feature extractor's attention mask
  out.values.resize(size_t(out.mel * out.frames));
  for (int64_t m = 0; m < out.mel; ++m) {
    for (int64_t f = 0; f < out.frames; ++f) {
      const double v = std::max(logmel[size_t(m * computed + f)], peak - 8.0);
      out.values[size_t(m * out.frames + f)] = float((v + 4.0) / 4.0);
    }
  }
  return out;
}

Result<LogMel> AudioFeatures(const std::string& wav, const AudioFeatureConfig& c) {
  OE_ASSIGN_OR_RETURN(Pcm pcm, DecodeWav(wav));
  OE_ASSIGN_OR_RETURN(std::vector<float> samples, Resample(pcm.samples, pcm.rate, c.sampling_rate));
  return WhisperLogMel(samples, c);
}

}  // namespace omni_edge::media
