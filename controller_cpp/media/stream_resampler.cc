#include "media/stream_resampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

namespace omni_edge::media {
namespace {

constexpr double kPiKaiser = 3.14159265358979323846;

// I0, the modified Bessel function of the first kind (the Kaiser window's), by its power series.
double BesselI0(double x) {
  double sum = 1.0, term = 1.0;
  for (int k = 1; k < 200 && term > 1e-17 * sum; ++k) {
    term *= (x / (2.0 * k)) * (x / (2.0 * k));
    sum += term;
  }
  return sum;
}

// scipy.signal.firwin(taps, cutoff, window=("kaiser", 5.0)): a windowed sinc scaled to unit gain at DC.
std::vector<double> KaiserLowpass(int64_t taps, double cutoff) {
  std::vector<double> h(static_cast<size_t>(taps));
  const double alpha = 0.5 * double(taps - 1), beta = 5.0;
  for (int64_t n = 0; n < taps; ++n) {
    const double m = double(n) - alpha, x = cutoff * m;
    const double sinc = x == 0 ? 1.0 : std::sin(kPiKaiser * x) / (kPiKaiser * x);
    const double r = 2.0 * double(n) / double(taps - 1) - 1.0;
    h[size_t(n)] = cutoff * sinc * BesselI0(beta * std::sqrt(std::max(0.0, 1.0 - r * r))) / BesselI0(beta);
  }
  const double sum = std::accumulate(h.begin(), h.end(), 0.0);
  for (double& v : h) v /= sum;
  return h;
}

int64_t FloorDiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

}  // namespace

Result<StreamResampler> StreamResampler::Create(int64_t rate, int64_t target) {
  if (rate < 1 || target < 1 || rate > kMaxSampleRate || target > kMaxSampleRate) {
    return Status::Error("invalid_argument", "sample rates must be in [1, " + std::to_string(kMaxSampleRate) + "]");
  }
  StreamResampler s;
  s.rate_ = rate;
  s.target_ = target;
  const int64_t g = std::gcd(rate, target);
  s.up_ = target / g;
  s.down_ = rate / g;
  if (s.up_ == 1 && s.down_ == 1) return s;
  const int64_t max_rate = std::max(s.up_, s.down_), half = 10 * max_rate;
  s.taps_ = KaiserLowpass(2 * half + 1, 1.0 / double(max_rate));
  for (double& v : s.taps_) v *= double(s.up_);
  // The filter's delay removed as scipy does: pad it in front to a multiple of `down`, then
  // drop the outputs before the first sample's centre.
  s.pre_ = s.down_ - half % s.down_;
  s.skip_ = (half + s.pre_) / s.down_;
  return s;
}

void StreamResampler::Range(int64_t o, int64_t* lo, int64_t* hi) const {
  // Output o of the padded filter reads upsampled input j - k through tap k - pre.
  const int64_t j = (o + skip_) * down_ - pre_, taps = int64_t(taps_.size());
  *hi = FloorDiv(j, up_);
  *lo = std::max<int64_t>(0, FloorDiv(j - (taps - 1) + up_ - 1, up_));
}

float StreamResampler::Output(int64_t o, int64_t last_input) const {
  int64_t lo = 0, hi = 0;
  Range(o, &lo, &hi);
  hi = std::min(hi, last_input);
  const int64_t j = (o + skip_) * down_ - pre_;
  double acc = 0;
  for (int64_t i = lo; i <= hi; ++i) acc += taps_[size_t(j - i * up_)] * double(held_[size_t(i - base_)]);
  return float(acc);
}

void StreamResampler::Trim() {
  int64_t lo = 0, hi = 0;
  Range(outputs_, &lo, &hi);
  const int64_t drop = std::min<int64_t>(lo - base_, int64_t(held_.size()));
  if (drop > 4096) {  // now and then, not per call
    held_.erase(held_.begin(), held_.begin() + drop);
    base_ += drop;
  }
}

std::vector<float> StreamResampler::Push(const float* x, size_t n) {
  if (up_ == 1 && down_ == 1) {
    inputs_ += int64_t(n);
    outputs_ += int64_t(n);
    return std::vector<float>(x, x + n);
  }
  held_.insert(held_.end(), x, x + n);
  inputs_ += int64_t(n);
  std::vector<float> out;
  for (;;) {
    int64_t lo = 0, hi = 0;
    Range(outputs_, &lo, &hi);
    if (hi >= inputs_) break;
    out.push_back(Output(outputs_, hi));
    ++outputs_;
  }
  Trim();
  return out;
}

std::vector<float> StreamResampler::Finish() {
  std::vector<float> out;
  if (up_ == 1 && down_ == 1) return out;
  const int64_t total = (inputs_ * up_ + down_ - 1) / down_;
  for (; outputs_ < total; ++outputs_) out.push_back(Output(outputs_, inputs_ - 1));
  return out;
}

void StreamResampler::Reset() {
  held_.clear();
  base_ = inputs_ = outputs_ = 0;
}

}  // namespace omni_edge::media
