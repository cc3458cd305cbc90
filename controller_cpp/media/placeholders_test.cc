#include "media/placeholders.h"

#include <gtest/gtest.h>

namespace omni_edge::media {
namespace {

PlaceholderIds Ids() {
  PlaceholderIds ids;
  ids.image = 90, ids.audio = 91, ids.vision_start = 92, ids.vision_end = 93, ids.audio_start = 94, ids.audio_end = 95;
  return ids;
}

TEST(Placeholders, ImageRowsSpanItsMergedGridAndTextContinuesAfterTheLargest) {
  const PlaceholderIds ids = Ids();
  std::vector<int32_t> prompt = {7, 8};
  const auto image = ImagePlaceholders(ids, {1, 4, 6});  // 2 x 3 merged patches
  ASSERT_EQ(image.size(), 2u + 6u);
  prompt.insert(prompt.end(), image.begin(), image.end());
  const auto audio = AudioPlaceholders(ids, 3);
  prompt.insert(prompt.end(), audio.begin(), audio.end());
  const auto got = ComputeMropePositions(prompt, ids, {{1, 4, 6}});
  ASSERT_TRUE(got.ok());
  // text 0, 1; vision start 2; the image from 3: t 3, h 3..4, w 3..5; vision end 6; audio 7..11.
  EXPECT_EQ(got->rows[0], (std::vector<int64_t>{0, 1, 2, 3, 3, 3, 3, 3, 3, 6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(got->rows[1], (std::vector<int64_t>{0, 1, 2, 3, 3, 3, 4, 4, 4, 6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(got->rows[2], (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(got->next, 12);
}

TEST(Placeholders, MismatchedImagesAreRefused) {
  const PlaceholderIds ids = Ids();
  EXPECT_FALSE(ComputeMropePositions({90, 90}, ids, {}).ok());          // a run without its image
  EXPECT_FALSE(ComputeMropePositions({1, 2}, ids, {{1, 4, 4}}).ok());    // an image without its run
  EXPECT_FALSE(ComputeMropePositions({90, 90}, ids, {{1, 4, 4}}).ok());  // 2 of its 4 placeholders
  EXPECT_FALSE(ComputeMropePositions({90}, ids, {{1, 3, 4}}).ok());      // not a multiple of the merge
  EXPECT_FALSE(PlaceholderIdsFromJson(Json{{"image_token_index", 1}}, "c").ok());
}

TEST(Placeholders, AVisionLanguageConfigNamesTheImageTokenIdAndHasNoAudio) {
  const Json qwen35 = Json::parse(R"({"image_token_id": 248056, "vision_start_token_id": 248053,
                                      "vision_end_token_id": 248054, "vision_config": {"spatial_merge_size": 2}})");
  const auto ids = PlaceholderIdsFromJson(qwen35, "c");
  ASSERT_TRUE(ids.ok()) << ids.status().message();
  EXPECT_EQ(ids->image, 248056);
  EXPECT_EQ(ids->vision_start, 248053);
  EXPECT_EQ(ids->audio, -1);
  Json half_audio = qwen35;
  half_audio["audio_token_index"] = 7;  // audio named without its start and end tokens
  EXPECT_EQ(PlaceholderIdsFromJson(half_audio, "c").status().message(), "c.audio_start_token_id: missing");
  Json no_image = qwen35;
  no_image.erase("image_token_id");
  EXPECT_EQ(PlaceholderIdsFromJson(no_image, "c").status().message(), "c.image_token_id: missing");
}

}  // namespace
}  // namespace omni_edge::media
