// Parsing request bodies as JSON, safely: a nesting limit is checked on the
// raw text before nlohmann::json (whose serializer and MessagePack encoder
// recurse) ever sees a deep document.
// Threading: pure functions.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

#include "base/status.h"

namespace cellar {

// Deepest nesting of arrays/objects in `text`, counting only brackets
// outside string literals. Works on any bytes (it does not validate JSON).
int JsonNestingDepth(std::string_view text);

// Parses `text` as one JSON document. InvalidArgument when it is empty, nests
// deeper than `max_depth`, or is not valid JSON (the message carries the
// parser's position and reason). Never throws.
Result<nlohmann::json> ParseJsonBody(std::string_view text, int max_depth);

}  // namespace cellar
