#include "media/placeholders.h"

#include <algorithm>
#include <string>

namespace omni_edge::media {
namespace {

Result<int32_t> TokenId(const Json& config, const char* key, const std::string& where) {
  if (!config.contains(key)) return Status::Error("invalid_field", where + "." + key + ": missing");
  int64_t v = 0;
  OE_RETURN_IF_ERROR(CheckInt(config[key], where + "." + key, 0, &v));
  if (v > INT32_MAX) return Status::Error("invalid_field", where + "." + key + ": above the int32 range");
  return int32_t(v);
}

}  // namespace

Result<PlaceholderIds> PlaceholderIdsFromJson(const Json& c, const std::string& where) {
  if (!c.is_object()) return Status::Error("invalid_field", where + ": must be an object");
  PlaceholderIds ids;
  // Qwen2.5-Omni names the image placeholder image_token_index; Qwen2-VL, Qwen3-VL and Qwen3.5
  // image_token_id, and have no audio.
  OE_ASSIGN_OR_RETURN(ids.image, TokenId(c, c.contains("image_token_index") ? "image_token_index" : "image_token_id", where));
  OE_ASSIGN_OR_RETURN(ids.vision_start, TokenId(c, "vision_start_token_id", where));
  OE_ASSIGN_OR_RETURN(ids.vision_end, TokenId(c, "vision_end_token_id", where));
  if (c.contains("audio_token_index")) {
    OE_ASSIGN_OR_RETURN(ids.audio, TokenId(c, "audio_token_index", where));
    OE_ASSIGN_OR_RETURN(ids.audio_start, TokenId(c, "audio_start_token_id", where));
    OE_ASSIGN_OR_RETURN(ids.audio_end, TokenId(c, "audio_end_token_id", where));
  }
  OE_ASSIGN_OR_RETURN(ids.position_id_per_seconds, GetInt(c, "position_id_per_seconds", 25, where));
  if (c.contains("vision_config")) {
    OE_ASSIGN_OR_RETURN(ids.merge_size, GetInt(c["vision_config"], "spatial_merge_size", 2, where + ".vision_config"));
  }
  if (ids.merge_size < 1 || ids.merge_size > 64 || ids.position_id_per_seconds < 0 || ids.position_id_per_seconds > 100000) {
    return Status::Error("invalid_field", where + ": spatial_merge_size in [1, 64] and position_id_per_seconds in [0, 1e5]");
  }
  return ids;
}

std::vector<int32_t> ImagePlaceholders(const PlaceholderIds& ids, const ImageGrid& grid) {
  std::vector<int32_t> out{ids.vision_start};
  out.insert(out.end(), size_t(grid.t * grid.h * grid.w / (ids.merge_size * ids.merge_size)), ids.image);
  out.push_back(ids.vision_end);
  return out;
}

std::vector<int32_t> AudioPlaceholders(const PlaceholderIds& ids, int64_t audio_tokens) {
  std::vector<int32_t> out{ids.audio_start};
  out.insert(out.end(), size_t(std::max<int64_t>(audio_tokens, 0)), ids.audio);
  out.push_back(ids.audio_end);
  return out;
}

Result<MropePositions> ComputeMropePositions(const std::vector<int32_t>& prompt, const PlaceholderIds& ids,
                                             const std::vector<ImageGrid>& images) {
  MropePositions out;
  for (auto& row : out.rows) row.reserve(prompt.size());
  const int64_t m = ids.merge_size;
  int64_t next = 0;
  size_t image = 0;
  for (size_t i = 0; i < prompt.size();) {
    if (prompt[i] != ids.image) {  // text, start/end tokens and audio placeholders: one position each
      for (auto& row : out.rows) row.push_back(next);
      ++next, ++i;
      continue;
    }
    if (image >= images.size()) return Status::Error("invalid_prompt", "more image placeholder runs than images");
    const ImageGrid& g = images[image++];
    if (g.t < 1 || g.h < 1 || g.w < 1 || g.h % m != 0 || g.w % m != 0) {
      return Status::Error("invalid_prompt", "an image grid must be positive and a multiple of the merge size");
    }
    const int64_t gh = g.h / m, gw = g.w / m, n = g.t * gh * gw;
    if (int64_t(prompt.size() - i) < n || !std::all_of(prompt.begin() + int64_t(i), prompt.begin() + int64_t(i) + n,
                                                       [&](int32_t id) { return id == ids.image; })) {
      return Status::Error("invalid_prompt", "image " + std::to_string(image - 1) + " needs " + std::to_string(n) +
                                                 " consecutive placeholders");
    }
    int64_t largest = next;
    for (int64_t t = 0; t < g.t; ++t) {
      for (int64_t h = 0; h < gh; ++h) {
        for (int64_t w = 0; w < gw; ++w) {
          const int64_t p[3] = {next + t * ids.position_id_per_seconds, next + h, next + w};
          for (int r = 0; r < 3; ++r) out.rows[size_t(r)].push_back(p[r]);
          largest = std::max({largest, p[0], p[1], p[2]});
        }
      }
    }
    next = largest + 1;
    i += size_t(n);
  }
  if (image != images.size()) return Status::Error("invalid_prompt", "fewer image placeholder runs than images");
  out.next = next;
  return out;
}

}  // namespace omni_edge::media
