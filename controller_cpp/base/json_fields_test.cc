#include "base/json_fields.h"

#include <gtest/gtest.h>

namespace omni_edge {
namespace {

TEST(ParseJson, RefusesInvalidTextDeepNestingAndBadUtf8) {
  EXPECT_EQ(ParseJson("{", "x").status().reason(), "invalid_json");
  EXPECT_EQ(ParseJson("NaN", "x").status().reason(), "invalid_json");
  EXPECT_EQ(ParseJson(std::string(200, '[') + std::string(200, ']'), "x").status().reason(), "invalid_json");
  EXPECT_EQ(ParseJson("\"\xff\xfe\"", "x").status().reason(), "invalid_json");
  // Brackets inside strings do not count as nesting.
  EXPECT_TRUE(ParseJson("\"" + std::string(500, '[') + "\"", "x").ok());
}

TEST(FieldReader, NamesTheFieldOnWrongTypes) {
  const Json j = Json::parse(R"({"s": 1, "i": "2", "b": 1, "f": true})");
  {
    FieldReader r(j, "obj");
    r.String("s");
    EXPECT_EQ(r.status().message(), "obj.s: expected a string, got integer");
  }
  {
    FieldReader r(j, "obj");
    r.Int("i");
    EXPECT_EQ(r.status().message(), "obj.i: expected an integer, got string");
  }
  {
    FieldReader r(j, "obj");
    r.Int("f");  // a bool where an int belongs
    EXPECT_EQ(r.status().message(), "obj.f: expected an integer, got boolean");
  }
  {
    FieldReader r(j, "obj");
    r.Bool("b");
    EXPECT_EQ(r.status().message(), "obj.b: expected a boolean, got integer");
  }
}

TEST(FieldReader, FirstErrorSticksAndUnknownFieldsAreRefused) {
  const Json j = Json::parse(R"({"a": "x", "zz": 1, "yy": 2})");
  FieldReader r(j, "obj");
  EXPECT_EQ(r.String("a"), "x");
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.Done().message(), "obj.yy: unknown field");
  r.Int("missing");
  EXPECT_EQ(r.status().message(), "obj.missing: required field is missing");
  r.String("a");  // after an error reads return defaults and keep the first error
  EXPECT_EQ(r.status().message(), "obj.missing: required field is missing");
}

TEST(FieldReader, IntegerRangeAndMinimum) {
  const Json j = Json::parse(R"({"big": 18446744073709551615, "neg": -1, "float": 1.0, "ok": 9223372036854775807})");
  {
    FieldReader r(j, "o");
    r.Int("big");
    EXPECT_EQ(r.status().message(), "o.big: integer out of 64-bit range");
  }
  {
    FieldReader r(j, "o");
    r.Int("neg", true, 0);
    EXPECT_EQ(r.status().message(), "o.neg: must be >= 0, got -1");
  }
  {
    FieldReader r(j, "o");
    r.Int("float");
    EXPECT_EQ(r.status().message(), "o.float: expected an integer, got number");
  }
  FieldReader r(j, "o");
  EXPECT_EQ(r.Int("ok"), INT64_MAX);
}

TEST(FieldReader, OptionalNullMeansDefault) {
  const Json j = Json::parse(R"({"s": null, "i": null})");
  FieldReader r(j, "o");
  EXPECT_EQ(r.String("s", false, true, "dflt"), "dflt");
  EXPECT_EQ(r.Int("i", false, std::nullopt, 7), 7);
  EXPECT_TRUE(r.Done().ok());
  FieldReader required(j, "o");
  required.String("s");
  EXPECT_EQ(required.status().message(), "o.s: expected a string, got null");
}

TEST(FieldReader, NotAnObject) {
  FieldReader r(Json::array(), "event");
  EXPECT_EQ(r.status().message(), "event: expected an object, got array");
}

}  // namespace
}  // namespace omni_edge
