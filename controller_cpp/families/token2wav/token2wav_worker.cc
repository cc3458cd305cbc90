#include "families/token2wav/token2wav_worker.h"

#include <algorithm>
#include <cstring>

#include "base/pcm.h"

namespace omni_edge::token2wav {

Result<std::unique_ptr<Token2WavWorker>> Token2WavWorker::Open(const StagePlan& stage, BackendPool& backends) {
  std::unique_ptr<Token2WavWorker> w(new Token2WavWorker());
  OE_ASSIGN_OR_RETURN(w->engine_, Token2Wav::Create(stage, backends));
  return w;
}

Json Token2WavWorker::Describe() const {
  const Token2WavConfig& c = engine_->config();
  return {{"sample_rate", c.sample_rate}, {"pcm_dtype", c.pcm_dtype}, {"samples_per_frame", 2 * c.samples_per_frame},
          {"code_groups", 1}, {"chunk_schedule", "fixed"}, {"voice", c.voice}};
}

Status Token2WavWorker::Begin(pipeline::StepContext& ctx) {
  const Token2WavConfig& c = engine_->config();
  carried_.assign(size_t(c.context), int32_t(c.silence));
  pending_.clear();
  codes_ = windows_ = samples_ = 0;
  backend_before_ = engine_->backend_seconds();
  const double t0 = ctx.ElapsedMs();
  const pipeline::Request& r = ctx.request();
  OE_RETURN_IF_ERROR(engine_->Start(r.speech_sampling ? r.speech_sampling->seed : c.noise_seed));  // HiFT's noise
  start_ms_ = ctx.ElapsedMs() - t0;
  return Status::Ok();
}

Status Token2WavWorker::Window(pipeline::StepContext& ctx, std::vector<int32_t> codes, bool last) {
  const Token2WavConfig& c = engine_->config();
  OE_ASSIGN_OR_RETURN(std::vector<float> pcm, engine_->Decode(codes, last));
  carried_.assign(codes.end() - std::min<size_t>(codes.size(), size_t(c.context)), codes.end());
  ++windows_;
  const int64_t n = int64_t(pcm.size());
  pipeline::Output out;
  out.kind = "pcm";
  out.fields = {{"first_sample", samples_}, {"n_samples", n}, {"frames_final", codes_ - int64_t(pending_.size())},
                {"dtype", c.pcm_dtype}};
  out.payloads.push_back({"pcm", c.pcm_dtype, {n}, EncodePcm(pcm, c.pcm_dtype)});
  samples_ += n;
  return ctx.Emit(std::move(out)).status();
}

Result<pipeline::StepResult> Token2WavWorker::Step(pipeline::StepContext& ctx) {
  using pipeline::StepResult;
  auto in = ctx.Next(0);
  if (!in) {
    if (ctx.stopping()) return StepResult::Continue();
    return StepResult::Finish(ctx.ended(0).value("finish_reason", std::string("done")));
  }
  const pipeline::Payload* codes = in->Find("codes");
  if (codes == nullptr) return StepResult::Continue();
  if (codes->dtype != "int32" || codes->bytes.size() != sizeof(int32_t)) {
    return Status::Error("invalid_input", "a codes event of " + std::to_string(codes->bytes.size()) +
                                              " bytes; token2wav reads one int32 code per frame");
  }
  int32_t code = 0;
  std::memcpy(&code, codes->bytes.data(), sizeof(code));
  pending_.push_back(code);
  ++codes_;
  const int64_t window = engine_->config().window;
  if (int64_t(pending_.size()) >= window) {
    std::vector<int32_t> w = carried_;
    w.insert(w.end(), pending_.begin(), pending_.begin() + window);
    pending_.erase(pending_.begin(), pending_.begin() + window);
    OE_RETURN_IF_ERROR(Window(ctx, std::move(w), /*last=*/false));
  }
  return StepResult::Continue();
}

Status Token2WavWorker::Flush(pipeline::StepContext& ctx) {
  if (codes_ == 0) return Status::Ok();  // nothing was said
  std::vector<int32_t> w = carried_;
  w.insert(w.end(), pending_.begin(), pending_.end());
  pending_.clear();
  return Window(ctx, std::move(w), /*last=*/true);
}

Json Token2WavWorker::Metrics(const pipeline::StepContext& ctx) const {
  return {{"frames", codes_}, {"samples", samples_}, {"windows", windows_},
          {"vocoder_ms", 1000.0 * (engine_->backend_seconds() - backend_before_)}, {"voice_prompt_ms", start_ms_}};
}

}  // namespace omni_edge::token2wav
