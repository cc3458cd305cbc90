#include "families/vocoder/vocoder_worker.h"

#include <algorithm>
#include <cstring>

#include "base/pcm.h"

namespace omni_edge::vocoder {

Result<std::unique_ptr<VocoderWorker>> VocoderWorker::Open(const StagePlan& stage, BackendPool& backends) {
  std::unique_ptr<VocoderWorker> w(new VocoderWorker());
  OE_ASSIGN_OR_RETURN(w->vocoder_, Vocoder::Create(stage, backends));
  Vocoder* vocoder = w->vocoder_.get();
  w->schedule_ = std::make_unique<ChunkSchedule>(
      vocoder->config(), [vocoder](int64_t start, int64_t n) { return vocoder->CostMs(start, n); });
  if (w->schedule_->adaptive()) OE_RETURN_IF_ERROR(vocoder->WarmUp());
  return w;
}

double VocoderWorker::PrebufferMs(const pipeline::Request& request) const {
  if (request.prebuffer_ms >= 0) return request.prebuffer_ms;
  return schedule_->adaptive() ? 0.0 : pipeline::kFixedSchedulePrebufferMs;
}

Json VocoderWorker::Describe() const {
  const VocoderConfig& c = vocoder_->config();
  return {{"sample_rate", c.sample_rate}, {"pcm_dtype", c.pcm_dtype}, {"samples_per_frame", c.samples_per_frame},
          {"code_groups", c.code_groups}, {"chunk_schedule", schedule_->adaptive() ? "adaptive" : "fixed"},
          {"prebuffer_ms", PrebufferMs(pipeline::Request())}};
}

Status VocoderWorker::Begin(pipeline::StepContext& ctx) {
  codes_.clear();
  next_ = 0;
  samples_ = 0;
  backend_before_ = vocoder_->backend_seconds();
  schedule_->Begin();
  clock_ = std::make_unique<pipeline::PlaybackClock>(vocoder_->config().sample_rate, PrebufferMs(ctx.request()));
  last_frame_ns_ = 0;
  chunk_frames_.clear();
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
  if (end > next_) chunk_frames_.push_back(end - next_);
  schedule_->Cut(end - next_);
  next_ = end;
  OE_RETURN_IF_ERROR(ctx.Emit(std::move(out)).status());
  clock_->Arrive(n, ctx.ElapsedMs());
  return Status::Ok();
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
  // The talker's pace from its own emission stamps: frames queued here while a window ran
  // arrive back to back, which says nothing of how fast the next one comes.
  if (in->emitted_monotonic_ns > 0 && last_frame_ns_ > 0 && in->emitted_monotonic_ns > last_frame_ns_) {
    frame_ms_.Add(double(in->emitted_monotonic_ns - last_frame_ns_) / 1e6);
  }
  last_frame_ns_ = in->emitted_monotonic_ns;
  while (!ctx.stopping()) {
    ChunkMoment m;
    m.start = next_;
    m.pending = frames - next_;
    m.frame_queued = ctx.input_queued(0);
    m.now_ms = ctx.ElapsedMs();
    m.runs_out_ms = clock_->runs_out_ms();
    m.frame_ms = frame_ms_.value();
    if (!schedule_->CutNow(m)) break;
    OE_RETURN_IF_ERROR(Decode(ctx, next_ + std::min(m.pending, schedule_->Limit(next_)), /*final=*/false));
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
          {"vocoder_ms", 1000.0 * (vocoder_->backend_seconds() - backend_before_)},
          {"chunk_schedule", schedule_->adaptive() ? "adaptive" : "fixed"}, {"chunk_frames", chunk_frames_}};
}

}  // namespace omni_edge::vocoder
