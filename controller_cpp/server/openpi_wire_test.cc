#include "server/openpi_wire.h"

#include <cstring>

#include <gtest/gtest.h>
#include <msgpack.hpp>

namespace omni_edge::server {
namespace {

using Packer = msgpack::packer<msgpack::sbuffer>;

void Bin(Packer& pk, const std::string& bytes) {
  pk.pack_bin(uint32_t(bytes.size()));
  pk.pack_bin_body(bytes.data(), uint32_t(bytes.size()));
}

// openpi's numpy encoding: bin keys, raw C-order bytes.
void NdArray(Packer& pk, const std::string& data, const std::string& dtype, const std::vector<int>& shape) {
  pk.pack_map(4);
  Bin(pk, "__ndarray__");
  pk.pack_true();
  Bin(pk, "data");
  Bin(pk, data);
  Bin(pk, "dtype");
  pk.pack(dtype);
  Bin(pk, "shape");
  pk.pack(shape);
}

std::string Bytes(const msgpack::sbuffer& b) { return std::string(b.data(), b.size()); }

// 2 x 4 pixels, pixel (y, x) = (10y + x, 100 + 10y + x, 200 + x).
std::string Hwc() {
  std::string out;
  for (int y = 0; y < 2; ++y) {
    for (int x = 0; x < 4; ++x) out += {char(10 * y + x), char(100 + 10 * y + x), char(200 + x)};
  }
  return out;
}

std::string Chw() {
  const std::string hwc = Hwc();
  std::string out(hwc.size(), '\0');
  for (int c = 0; c < 3; ++c) {
    for (int i = 0; i < 8; ++i) out[c * 8 + i] = hwc[i * 3 + c];
  }
  return out;
}

TEST(OpenPiWire, AnObservationBecomesTheControllersRequest) {
  msgpack::sbuffer b;
  Packer pk(&b);
  pk.pack_map(6);
  pk.pack(std::string("images"));
  pk.pack_map(2);
  pk.pack(std::string("base"));
  NdArray(pk, Hwc(), "|u1", {2, 4, 3});
  pk.pack(std::string("wrist"));
  NdArray(pk, Chw(), "|u1", {3, 2, 4});  // channels first, as openpi's ALOHA example sends them
  pk.pack(std::string("state"));
  const double state[] = {0.5, -2};
  NdArray(pk, std::string(reinterpret_cast<const char*>(state), sizeof(state)), "<f8", {2});
  pk.pack(std::string("prompt"));
  pk.pack(std::string("pick"));
  pk.pack(std::string("timestamp_ms"));
  pk.pack(1764900000000.5);
  pk.pack(std::string("noise"));
  const float noise[] = {1, 2, 3, 4, 5, 6};
  NdArray(pk, std::string(reinterpret_cast<const char*>(noise), sizeof(noise)), "<f4", {3, 2});
  pk.pack(std::string("session_id"));
  pk.pack(std::string("s1"));
  auto obs = ParseObservation(Bytes(b));
  ASSERT_TRUE(obs.ok()) << obs.status().ToString();
  ASSERT_EQ(obs->images.size(), 2u);
  const std::string& bmp = obs->images[0].bmp;
  ASSERT_EQ(bmp.size(), 54u + 2 * 12);  // rows of 12 bytes (4 pixels): no padding
  EXPECT_EQ(bmp.substr(0, 2), "BM");
  EXPECT_EQ(uint8_t(bmp[54]), 200);      // bottom row first (y = 1), x = 0, blue first
  EXPECT_EQ(uint8_t(bmp[55]), 110);
  EXPECT_EQ(uint8_t(bmp[56]), 10);
  EXPECT_EQ(uint8_t(bmp[66 + 2]), 0);    // top row (y = 0), x = 0: red 0
  EXPECT_EQ(uint8_t(bmp[66 + 9]), 203);  // top row, x = 3: blue 203
  EXPECT_EQ(obs->images[1].bmp, bmp);    // channels first: the same image
  EXPECT_EQ(obs->state, (std::vector<float>{0.5f, -2.0f}));
  EXPECT_EQ(obs->prompt, "pick");
  EXPECT_EQ(*obs->timestamp_ms, 1764900000000.5);
  EXPECT_EQ(obs->noise_rows, 3);
  EXPECT_EQ(obs->noise, (std::vector<float>{1, 2, 3, 4, 5, 6}));
}

std::string ObservationRefusal(const std::function<void(Packer&)>& fill) {
  msgpack::sbuffer b;
  Packer pk(&b);
  fill(pk);
  auto r = ParseObservation(Bytes(b));
  return r.ok() ? "ok" : r.status().message();
}

TEST(OpenPiWire, BadObservationsAreRefusedByName) {
  EXPECT_EQ(ParseObservation("\xc1").status().reason(), "invalid_request");  // 0xc1: never used in msgpack
  EXPECT_EQ(ObservationRefusal([](Packer& pk) { pk.pack_array(0); }), "an observation is a msgpack map");
  EXPECT_EQ(ObservationRefusal([](Packer& pk) { pk.pack_map(1), pk.pack(std::string("observation/image")), pk.pack(1); })
                .rfind("observation/image: not read here", 0), 0u);
  EXPECT_EQ(ObservationRefusal([](Packer& pk) {
              pk.pack_map(1), pk.pack(std::string("images")), pk.pack_map(1), pk.pack(std::string("cam"));
              NdArray(pk, std::string(24, '\0'), "<f4", {2, 1, 3});
            }).rfind("images.cam: expected an H x W x 3", 0), 0u);
  EXPECT_EQ(ObservationRefusal([](Packer& pk) {
              pk.pack_map(1), pk.pack(std::string("state"));
              NdArray(pk, std::string(7, '\0'), "<f4", {2});
            }).rfind("state: data holds 7 bytes", 0), 0u);
  EXPECT_EQ(ObservationRefusal([](Packer& pk) {
              pk.pack_map(1), pk.pack(std::string("state")), pk.pack_array(1), pk.pack(std::nan(""));
            }).rfind("state: a value that is not finite", 0), 0u);
  EXPECT_EQ(ObservationRefusal([](Packer& pk) { pk.pack_map(1), pk.pack(std::string("endpoint")), pk.pack(std::string("x")); }),
            "endpoint: infer or reset");
}

TEST(OpenPiWire, ActionsArePackedAsOpenPiArrays) {
  const std::string frame = PackActions({1, 2, 3, 4, 5, 6}, 3, 2, {{"server_timing", {{"infer_ms", 1.5}}}});
  const msgpack::object_handle h = msgpack::unpack(frame.data(), frame.size());
  const msgpack::object& root = h.get();
  ASSERT_EQ(root.type, msgpack::type::MAP);
  ASSERT_EQ(root.via.map.size, 2u);
  const msgpack::object& actions = root.via.map.ptr[0].val;
  ASSERT_EQ(actions.via.map.size, 4u);
  for (uint32_t i = 0; i < 4; ++i) EXPECT_EQ(actions.via.map.ptr[i].key.type, msgpack::type::BIN);  // openpi-client looks for bin keys
  const msgpack::object& data = actions.via.map.ptr[1].val;
  float got[6];
  ASSERT_EQ(data.via.bin.size, sizeof(got));
  std::memcpy(got, data.via.bin.ptr, sizeof(got));
  EXPECT_EQ(got[5], 6.0f);
  // {"a": [1, "b", true, nil, 2.5]}: map, "a", array, 1, "b", true, nil, float64
  EXPECT_EQ(PackJson({{"a", {1, "b", true, nullptr, 2.5}}}), std::string("\x81\xa1""a\x95\x01\xa1""b\xc3\xc0\xcb\x40\x04", 12) +
                                                               std::string(6, '\0'));
}

}  // namespace
}  // namespace omni_edge::server
