// How a multimodal thinker (Qwen2.5-Omni, Qwen2-VL) reads media in its prompt: each item as
// placeholder tokens between its start and end tokens, and the three position rows of its
// multimodal RoPE (temporal, height, width). Text and audio placeholders advance all three rows
// together; an image's placeholders take (start + t x position_id_per_seconds, start + row,
// start + column) over its merged patch grid, and the next token continues after the largest
// position used. Equal to transformers' get_rope_index for text, images and audio.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "base/json_fields.h"
#include "base/status.h"

namespace omni_edge::media {

struct PlaceholderIds {
  int32_t image = -1, audio = -1, vision_start = -1, vision_end = -1, audio_start = -1, audio_end = -1;
  int64_t merge_size = 2, position_id_per_seconds = 25;
};

// From a thinker config (the fields a Qwen2.5-Omni thinker's config.json has; a release's
// `thinker_config`): image_token_index, audio_token_index, vision_start/end_token_id,
// audio_start/end_token_id, position_id_per_seconds, vision_config.spatial_merge_size. A
// vision-language config (Qwen2-VL, Qwen3.5) names the image image_token_id and has no audio
// (`audio` stays -1).
Result<PlaceholderIds> PlaceholderIdsFromJson(const Json& thinker_config, const std::string& where);

struct ImageGrid {
  int64_t t = 1, h = 0, w = 0;  // in patches, before merging
};

// The placeholders of one image (grid) or one audio item (`audio_tokens`), with start and end.
std::vector<int32_t> ImagePlaceholders(const PlaceholderIds& ids, const ImageGrid& grid);
std::vector<int32_t> AudioPlaceholders(const PlaceholderIds& ids, int64_t audio_tokens);

// The three position rows of a prompt whose image placeholder runs belong to `images` in order;
// `next` is the position the first generated token takes (rows are equal after the prompt).
struct MropePositions {
  std::array<std::vector<int64_t>, 3> rows;
  int64_t next = 0;
};
Result<MropePositions> ComputeMropePositions(const std::vector<int32_t>& prompt, const PlaceholderIds& ids,
                                             const std::vector<ImageGrid>& images);

}  // namespace omni_edge::media
