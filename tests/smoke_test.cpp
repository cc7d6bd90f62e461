// Smoke tests of core types: dtype table and Status/Expected plumbing.
#include <gtest/gtest.h>

#include "core/dtype.h"
#include "core/status.h"

namespace lockstep {
namespace {

TEST(DType, GeometryMatchesGguf) {
  EXPECT_EQ(Info(DType::Q4_K).type_size, 144u);
  EXPECT_EQ(RowBytes(DType::Q8_0, 64), 68u);
  EXPECT_FALSE(LookupDType(4).has_value());  // removed Q4_2 id
}

Expected<int> Half(int x) {
  if (x % 2) return Status::Errorf("{} is odd", x);
  return x / 2;
}

Status UseHalf(int x, int* out) {
  LS_ASSIGN_OR_RETURN(*out, Half(x));
  return Status::Ok();
}

TEST(Status, PropagatesErrors) {
  int v = 0;
  EXPECT_TRUE(UseHalf(4, &v).ok());
  EXPECT_EQ(v, 2);
  Status s = UseHalf(3, &v);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "3 is odd");
}

}  // namespace
}  // namespace lockstep
