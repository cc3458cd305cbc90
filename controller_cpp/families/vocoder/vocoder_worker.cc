#include "families/vocoder/vocoder_worker.h"

#include <algorithm>
#include <cstring>

#include "base/pcm.h"

namespace omni_edge::vocoder {
namespace {

std::string EncodePcm(const std::vector<float>& samples, const std::string& dtype) {
  if (dtype == "float32") return std::string(reinterpret_cast<const char*>(samples.data()), samples.size() * sizeof(float));
  std::vector<int16_t> out(samples.size());
  std::transform(samples.begin(), samples.end(), out.begin(), ToInt16);
  return std::string(reinterpret_cast<const char*>(out.data()), out.size() * sizeof(int16_t));
}

}  // namespace

Result<std::unique_ptr<VocoderWorker>> VocoderWorker::Open(const StagePlan& stage, BackendPool& backends) {
  std::unique_ptr<VocoderWorker> w(new VocoderWorker());
  OE_ASSIGN_OR_RETURN(w->vocoder_, Vocoder::Create(stage, backends));
  return w;
}

Json VocoderWorker::Describe() const {
  const VocoderConfig& c = vocoder_->config();
  return {{"sample_rate", c.sample_rate}, {"pcm_dtype", c.pcm_dtype}, {"samples_per_frame", c.samples_per_frame},
          {"code_groups", c.code_groups}};
}

Status VocoderWorker::Begin(pipeline::StepContext& ctx) {
  codes_.clear();
  next_ = 0;
  samples_ = 0;
  backend_before_ = vocoder_->backend_seconds();
  return Status::Ok();
}

Status VocoderWorker::Decode(pipeline::StepContext& ctx, int64_t end, bool final) {
  const VocoderConfig& c = vocoder_->config();
  OE_ASSIGN_OR_RETURN(std::vector<float> pcm, vocoder_->Decode(codes_, next_, end, final));
  const int64_t n = int64_t(pcm.size());
  pipeline::Output out;
  out.kind = "pcm";
  out.fields = {{"first_sample", samples_}, {"n_samples", n}, {"frames_final", end}, {"dtype", c.pcm_dtype}};
  out.payloads.push_back({"pcm", c.pcm_dtype, {n}, EncodePcm(pcm, c.pcm_dtype)});
  samples_ += n;
  next_ = end;
  return ctx.Emit(std::move(out)).status();
}

Result<pipeline::StepResult> VocoderWorker::Step(pipeline::StepContext& ctx) {
  using pipeline::StepResult;
  const int64_t G = vocoder_->config().code_groups;
  auto in = ctx.Next(0);
  if (!in) {  // the codes ended: for the reason the talker gave, unless it was cancelled or failed
    if (ctx.stopping()) return StepResult::Continue();
    return StepResult::Finish(ctx.ended(0).value("finish_reason", std::string("done")));
  }
  const pipeline::Payload* codes = in->Find("codes");
  if (codes == nullptr) return StepResult::Continue();
  if (codes->dtype != "int32" || int64_t(codes->bytes.size()) != G * int64_t(sizeof(int32_t))) {
    return Status::Error("invalid_input", "a codes event of " + std::to_string(codes->bytes.size()) + " bytes; this vocoder reads " +
                                              std::to_string(G) + " int32 codes per frame");
  }
  const size_t at = codes_.size();
  codes_.resize(at + size_t(G));
  std::memcpy(codes_.data() + at, codes->bytes.data(), codes->bytes.size());
  const int64_t frames = int64_t(codes_.size()) / G;
  while (!ctx.stopping() && frames - next_ >= vocoder_->shape().ChunkFrames(next_)) {
    OE_RETURN_IF_ERROR(Decode(ctx, next_ + vocoder_->shape().ChunkFrames(next_), /*final=*/false));
  }
  return StepResult::Continue();
}

Status VocoderWorker::Flush(pipeline::StepContext& ctx) {
  // End of speech: the frames left over, with the tail the last frame still held back.
  const int64_t frames = int64_t(codes_.size()) / vocoder_->config().code_groups;
  return frames > 0 ? Decode(ctx, frames, /*final=*/true) : Status::Ok();
}

Json VocoderWorker::Metrics(const pipeline::StepContext& ctx) const {
  return {{"frames", int64_t(codes_.size()) / vocoder_->config().code_groups}, {"samples", samples_},
          {"vocoder_ms", 1000.0 * (vocoder_->backend_seconds() - backend_before_)}};
}

}  // namespace omni_edge::vocoder
