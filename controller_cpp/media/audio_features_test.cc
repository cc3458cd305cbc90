#include "media/audio_features.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

namespace omni_edge::media {
namespace {

void Put32(std::string& s, uint32_t v) {
  for (int i = 0; i < 4; ++i) s.push_back(char((v >> (8 * i)) & 0xFF));
}
void Put16(std::string& s, uint16_t v) {
  s.push_back(char(v & 0xFF));
  s.push_back(char(v >> 8));
}

std::string Wav(uint16_t format, uint16_t channels, uint32_t rate, uint16_t bits, const std::string& data) {
  std::string fmt, out = "RIFF";
  Put16(fmt, format);
  Put16(fmt, channels);
  Put32(fmt, rate);
  Put32(fmt, rate * channels * bits / 8);
  Put16(fmt, uint16_t(channels * bits / 8));
  Put16(fmt, bits);
  Put32(out, uint32_t(4 + 8 + fmt.size() + 8 + data.size()));
  out += "WAVEfmt ";
  Put32(out, uint32_t(fmt.size()));
  out += fmt + "data";
  Put32(out, uint32_t(data.size()));
  return out + data;
}

TEST(AudioFeatures, WavChannelsAreAveragedAndSamplesScaledAsNumpyReadsThem) {
  std::string data;
  for (int16_t v : {int16_t(16384), int16_t(-16384), int16_t(32767), int16_t(-32768)}) Put16(data, uint16_t(v));
  auto pcm = DecodeWav(Wav(1, 2, 8000, 16, data));
  ASSERT_TRUE(pcm.ok()) << pcm.status().message();
  EXPECT_EQ(pcm->rate, 8000);
  ASSERT_EQ(pcm->samples.size(), 2u);
  EXPECT_FLOAT_EQ(pcm->samples[0], 0.0f);
  EXPECT_FLOAT_EQ(pcm->samples[1], (32767.0f / 32768.0f - 1.0f) / 2.0f);
  auto u8 = DecodeWav(Wav(1, 1, 8000, 8, std::string("\x80\xff\x00", 3)));
  ASSERT_TRUE(u8.ok());
  EXPECT_EQ(u8->samples, (std::vector<float>{0.0f, 127.0f / 128.0f, -1.0f}));
}

TEST(AudioFeatures, WhatIsNotAReadableWavIsRefusedByName) {
  EXPECT_NE(DecodeWav("RIFF\0\0\0\0WAVX").status().message().find("not a WAV"), std::string::npos);
  EXPECT_NE(DecodeWav(Wav(2, 1, 8000, 4, "ab")).status().message().find("format 2"), std::string::npos);  // ADPCM
  EXPECT_NE(DecodeWav(Wav(1, 1, 100, 16, "ab")).status().message().find("sample rate"), std::string::npos);
  std::string no_data = Wav(1, 1, 8000, 16, "");
  no_data.resize(no_data.size() - 8);
  EXPECT_NE(DecodeWav(no_data).status().message().find("no data"), std::string::npos);
  EXPECT_TRUE(DecodeWav(Wav(1, 1, 8000, 16, "")).ok());  // empty, but a WAV
}

TEST(AudioFeatures, ResamplingKeepsAConstantAndHasTheReferenceLength) {
  const std::vector<float> ones(4410, 0.5f);
  auto y = Resample(ones, 44100, 16000);
  ASSERT_TRUE(y.ok());
  ASSERT_EQ(y->size(), 1600u);  // ceil(4410 * 160 / 441)
  for (size_t i = 200; i < 1400; ++i) EXPECT_NEAR((*y)[i], 0.5f, 1e-3f) << i;  // unit gain at DC, away from the edges
  EXPECT_FALSE(Resample(ones, 0, 16000).ok());
  EXPECT_EQ(Resample(ones, 16000, 16000)->size(), ones.size());
}

TEST(AudioFeatures, LogMelFramesFollowTheAudioAndLongAudioIsRefused) {
  AudioFeatureConfig c;
  std::vector<float> tone(16000 + 5);
  for (size_t i = 0; i < tone.size(); ++i) tone[i] = 0.5f * float(std::sin(2 * 3.14159265 * 440.0 * double(i) / 16000.0));
  auto mel = WhisperLogMel(tone, c);
  ASSERT_TRUE(mel.ok()) << mel.status().message();
  EXPECT_EQ(mel->mel, 128);
  EXPECT_EQ(mel->frames, 101);  // ceil(16005 / 160)
  float peak = -100;
  for (float v : mel->values) peak = std::max(peak, v);
  for (float v : mel->values) EXPECT_GE(v, peak - 2.0f - 1e-5f);  // clamped 8 (in log10) below the peak, then / 4
  EXPECT_NE(WhisperLogMel(std::vector<float>(480001), c).status().message().find("longer"), std::string::npos);
  EXPECT_FALSE(WhisperLogMel({}, c).ok());
}

}  // namespace
}  // namespace omni_edge::media
