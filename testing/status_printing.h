// Status codes print by name ("NotFound") in GoogleTest failure messages, and
// ASSERT_OK(status) fails with the statement and the status's message.
#pragma once

#include <ostream>

#include "base/status.h"

namespace cellar {

// Found by argument-dependent lookup from EXPECT_EQ(StatusCode, StatusCode).
inline void PrintTo(StatusCode code, std::ostream* os) { *os << StatusCodeName(code); }

}  // namespace cellar

// REQUIRES: gtest included by the test file.
#define ASSERT_OK(expr)                                       \
  do {                                                        \
    const ::cellar::Status st_ = (expr);                      \
    ASSERT_TRUE(st_.ok()) << #expr << ": " << st_.ToString(); \
  } while (0)
