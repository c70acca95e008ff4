// Fuzzes the cell body codec (cells/body_codec.h). The first byte picks a mode:
//   'J' rest is JSON text: parse, EncodeBody, DecodeBody must give it back
//   'M' rest is MessagePack: wrapped in a valid zstd frame + format byte and
//       decoded, so mutations reach the MessagePack decoder past zstd
//   else the input is a stored body as read from MySQL: DecodeBody must
//       answer a value or InvalidArgument, never crash or throw
//
// KNOWN CRASH, skipped below so the fuzzer can look for others: EncodeBody
// and DecodeBody recurse once per nesting level (nlohmann's MessagePack
// writer/reader and dump()), so a body nested ~20,000 deep (a 40 KB JSON
// object, well under limits.max_body_bytes) overflows the stack: CellStore::Put
// crashes on it, and a stored one would crash every reader. The HTTP API
// rejects bodies nested deeper than 64 before they reach the store
// (workers/http/json_body.h). Remove kMaxFuzzDepth once cells/ bounds depth.
#include <zstd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "cells/body_codec.h"

namespace {

constexpr int kMaxFuzzDepth = 2000;

// Nesting of '[' / '{' outside JSON strings.
int JsonDepth(std::string_view text) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

// An upper bound of MessagePack nesting: the number of container headers.
int MsgpackContainers(std::string_view bytes) {
  int n = 0;
  for (unsigned char b : bytes) n += (b >= 0x80 && b <= 0x9f) || (b >= 0xdc && b <= 0xdf);
  return n;
}

std::string Dump(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  if (!in.empty() && in[0] == 'J') {
    if (JsonDepth(in) > kMaxFuzzDepth) return 0;  // the known crash above
    nlohmann::json j = nlohmann::json::parse(in.substr(1), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return 0;
    auto back = cellar::DecodeBody(cellar::EncodeBody(j));
    if (!back.ok() || Dump(*back) != Dump(j)) std::abort();  // a lossy round trip
    return 0;
  }
  if (!in.empty() && in[0] == 'M') {
    if (MsgpackContainers(in) > kMaxFuzzDepth) return 0;  // the known crash above
    std::string stored(1 + ZSTD_compressBound(size - 1), '\0');
    stored[0] = 0x01;
    const size_t n = ZSTD_compress(stored.data() + 1, stored.size() - 1, data + 1, size - 1, 1);
    if (ZSTD_isError(n)) return 0;
    stored.resize(1 + n);
    auto r = cellar::DecodeBody(stored);
    if (r.ok()) {  // whatever decodes must encode and decode to the same value
      auto again = cellar::DecodeBody(cellar::EncodeBody(*r));
      if (!again.ok() || Dump(*again) != Dump(*r)) std::abort();
    }
    return 0;
  }
  auto r = cellar::DecodeBody(in);
  if (!r.ok() && r.status().code() != cellar::StatusCode::kInvalidArgument) std::abort();
  return 0;
}
