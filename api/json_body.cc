#include "api/json_body.h"

#include <algorithm>
#include <string>

namespace cellar {

int JsonNestingDepth(std::string_view text) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

Result<nlohmann::json> ParseJsonBody(std::string_view text, int max_depth) {
  size_t first = 0;
  while (first < text.size() &&
         (text[first] == ' ' || text[first] == '\n' || text[first] == '\r' || text[first] == '\t'))
    ++first;
  if (first == text.size()) return InvalidArgument("the request body is empty: expected JSON");
  const int depth = JsonNestingDepth(text);
  if (depth > max_depth)
    return InvalidArgument("the JSON nests " + std::to_string(depth) +
                           " levels deep, over the limit of " + std::to_string(max_depth));
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("the request body is not valid JSON: ") + e.what());
  }
}

}  // namespace cellar
