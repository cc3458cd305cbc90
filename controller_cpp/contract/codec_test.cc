#include "contract/codec.h"

#include <gtest/gtest.h>

#include "contract/contract_testing.h"

namespace omni_edge::contract {
namespace {

using testing::MakeEvent;
using testing::MakeRequest;
using testing::MakeState;

Json Buffer() {
  return Json::parse(R"({"object_id": "o", "owner": "w", "generation": "g", "dtype": "float16",
                         "shape": [2, 3], "nbytes": 12})");
}

std::string Reason(const Json& j, const char* type) {
  auto out = CanonicalJson(type, j.dump());
  return out.ok() ? "ok" : out.status().reason();
}

TEST(Codec, EveryTypeRoundTripsToAnEqualValue) {
  StageRequest req = MakeRequest();
  req.inputs.push_back(BufferRefFromJson(Buffer()).value());
  req.state = MakeState();
  auto req2 = StageRequestFromJson(ToJson(req));
  ASSERT_TRUE(req2.ok()) << req2.status().ToString();
  EXPECT_EQ(req2.value(), req);

  StageEvent ev = MakeEvent(req, 1, /*payload=*/12);
  ev.buffers = req.inputs;
  ev.state = MakeState();
  ev.error = "boom";
  ev.started_monotonic_ns = 5;
  ev.emitted_monotonic_ns = 9;
  auto ev2 = StageEventFromJson(ToJson(ev));
  ASSERT_TRUE(ev2.ok()) << ev2.status().ToString();
  EXPECT_EQ(ev2.value(), ev);

  DeviceDescriptor d{"npu0", "npu", "Hexagon v79", "device-ram", 12LL << 30, {"qnn-htp"}, {{"htp_arch", "79"}}};
  auto d2 = DeviceDescriptorFromJson(ToJson(d));
  ASSERT_TRUE(d2.ok()) << d2.status().ToString();
  EXPECT_EQ(d2.value(), d);
}

TEST(Codec, DefaultsFillOptionalFields) {
  auto b = BufferRefFromJson(Buffer());
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->memory_domain, "host-copy");
  EXPECT_EQ(b->layout, "C");
  EXPECT_TRUE(b->ready);
}

TEST(Codec, BufferRules) {
  EXPECT_EQ(Reason(Buffer(), "buffer"), "ok");
  Json j = Buffer();
  j["nbytes"] = 13;
  EXPECT_EQ(Reason(j, "buffer"), "invalid_buffer");
  j = Buffer();
  j["dtype"] = "bfloat16";
  EXPECT_EQ(Reason(j, "buffer"), "invalid_field");
  j = Buffer();
  j["shape"] = Json::array();
  for (int i = 0; i < 33; ++i) j["shape"].push_back(1);
  j["nbytes"] = 2;
  EXPECT_EQ(Reason(j, "buffer"), "invalid_field");
  j = Buffer();
  j["shape"] = {1024, 1024, 1024};  // exactly 2 GiB of float16 is allowed
  j["nbytes"] = int64_t(2) * 1024 * 1024 * 1024;
  EXPECT_EQ(Reason(j, "buffer"), "ok");
  j["dtype"] = "float32";  // 4 GiB is not
  j["nbytes"] = int64_t(4) * 1024 * 1024 * 1024;
  EXPECT_EQ(Reason(j, "buffer"), "invalid_buffer");
  j["shape"] = {4611686018427387904LL, 4};  // product overflows int64
  EXPECT_EQ(Reason(j, "buffer"), "invalid_buffer");
  j = Buffer();
  j["memory_domain"] = "device";
  EXPECT_EQ(Reason(j, "buffer"), "invalid_buffer");
  j = Buffer();
  j["ready"] = false;
  EXPECT_EQ(Reason(j, "buffer"), "invalid_buffer");
  j = Buffer();
  j["owner"] = "";
  EXPECT_EQ(Reason(j, "buffer"), "invalid_field");
  j = Buffer();
  j["shape"] = {2, -3};
  EXPECT_EQ(Reason(j, "buffer"), "invalid_field");
}

TEST(Codec, WrongTypesAndUnknownFieldsNameTheField) {
  Json j = ToJson(MakeEvent(MakeRequest(), 1));
  j["seq"] = "1";
  auto out = StageEventFromJson(j);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message(), "event.seq: expected an integer, got string");
  j = ToJson(MakeEvent(MakeRequest(), 1));
  j["terminal"] = 0;
  EXPECT_EQ(StageEventFromJson(j).status().message(), "event.terminal: expected a boolean, got integer");
  j = ToJson(MakeEvent(MakeRequest(), 1));
  j["stage_id"] = true;
  EXPECT_EQ(StageEventFromJson(j).status().message(), "event.stage_id: expected an integer, got boolean");
  j = ToJson(MakeEvent(MakeRequest(), 1));
  j["extra"] = 1;
  EXPECT_EQ(StageEventFromJson(j).status().message(), "event.extra: unknown field");
  j = ToJson(MakeRequest());
  j["inputs"] = Json::array({Buffer()});
  j["inputs"][0]["nbytes"] = "12";
  EXPECT_EQ(StageRequestFromJson(j).status().message(), "request.inputs[0].nbytes: expected an integer, got string");
}

TEST(Codec, RequestStateBindingRules) {
  StageRequest req = MakeRequest();
  req.state = MakeState();
  EXPECT_EQ(Reason(ToJson(req), "request"), "ok");
  Json j = ToJson(req);
  j["state"]["state_id"] = "";  // unbound handle
  EXPECT_EQ(Reason(j, "request"), "invalid_request");
  j = ToJson(req);
  j["state"]["epoch"] = 1;  // bound to another epoch
  EXPECT_EQ(Reason(j, "request"), "invalid_request");
  j = ToJson(req);
  j["session_id"] = "other";
  EXPECT_EQ(Reason(j, "request"), "invalid_request");
  j = ToJson(req);
  j["state_layout_version"] = 2;
  EXPECT_EQ(Reason(j, "request"), "invalid_request");
  j = ToJson(req);
  j["artifact_id"] = "other";
  EXPECT_EQ(Reason(j, "request"), "invalid_request");
  j = ToJson(req);
  j["operation"] = "release";
  EXPECT_EQ(Reason(j, "request"), "ok");
  j["inputs"] = Json::array({Buffer()});
  EXPECT_EQ(Reason(j, "request"), "invalid_request");
  j = ToJson(MakeRequest());
  j["operation"] = "release";  // release without a state
  EXPECT_EQ(Reason(j, "request"), "invalid_request");
  j["operation"] = "pause";
  EXPECT_EQ(Reason(j, "request"), "invalid_field");
}

TEST(Codec, EventRules) {
  const StageRequest req = MakeRequest();
  Json j = ToJson(MakeEvent(req, 1));
  j["started_monotonic_ns"] = 5;
  EXPECT_EQ(Reason(j, "event"), "invalid_event");  // started without emitted
  j["emitted_monotonic_ns"] = 4;
  EXPECT_EQ(Reason(j, "event"), "invalid_event");  // emitted before started
  j["emitted_monotonic_ns"] = 5;
  EXPECT_EQ(Reason(j, "event"), "ok");
  j = ToJson(MakeEvent(req, 1, /*payload=*/5));
  j["buffers"] = Json::array({Buffer()});  // 12 bytes of buffers but 5 declared
  EXPECT_EQ(Reason(j, "event"), "invalid_event");
  j["payload_nbytes"] = 0;  // undeclared payload is allowed
  EXPECT_EQ(Reason(j, "event"), "ok");
  j = ToJson(MakeEvent(req, 1));
  j["state"] = ToJson(MakeState("kv", /*epoch=*/3));
  EXPECT_EQ(Reason(j, "event"), "invalid_event");
  j = ToJson(MakeEvent(req, 1));
  j["error"] = 3;
  EXPECT_EQ(Reason(j, "event"), "invalid_field");
  j = ToJson(MakeEvent(req, 1));
  j["kind"] = "";
  EXPECT_EQ(Reason(j, "event"), "invalid_field");
}

TEST(Codec, DeviceRules) {
  Json j = {{"device_id", "gpu0"}, {"kind", "tpu"}, {"name", "x"}, {"memory_pool", "vram"}, {"memory_bytes", 1}};
  EXPECT_EQ(Reason(j, "device"), "invalid_field");
  j["kind"] = "gpu";
  EXPECT_EQ(Reason(j, "device"), "ok");
  j["properties"] = {{"a", 1}};
  EXPECT_EQ(Reason(j, "device"), "invalid_field");
}

TEST(Codec, UnknownTypeName) { EXPECT_EQ(CanonicalJson("thing", "{}").status().reason(), "invalid_argument"); }

}  // namespace
}  // namespace omni_edge::contract
