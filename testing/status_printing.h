// Status codes print by name ("NotFound") in GoogleTest failure messages.
#pragma once

#include <ostream>

#include "base/status.h"

namespace cellar {

// Found by argument-dependent lookup from EXPECT_EQ(StatusCode, StatusCode).
inline void PrintTo(StatusCode code, std::ostream* os) { *os << StatusCodeName(code); }

}  // namespace cellar
