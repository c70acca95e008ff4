// Fuzzes the cell body codec (cells/body_codec.h). The first byte picks a mode:
//   'J' rest is JSON text: parse, EncodeBody, DecodeBody must give it back
//   'M' rest is MessagePack: wrapped in a valid zstd frame + format byte and
//       decoded, so mutations reach the MessagePack decoder past zstd
//   else the input is a stored body as read from MySQL: DecodeBody must
//       answer a value or InvalidArgument, never crash or throw
//
// EncodeBody's precondition (nesting <= kMaxBodyDepth, checked by the store's
// validation) is respected in 'J' mode; DecodeBody must refuse deeper input.
#include <zstd.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "cells/body_codec.h"

namespace {

std::string Dump(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  if (!in.empty() && in[0] == 'J') {
    nlohmann::json j = nlohmann::json::parse(in.substr(1), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || cellar::JsonDepth(j) > cellar::kMaxBodyDepth) return 0;
    auto back = cellar::DecodeBody(cellar::EncodeBody(j));
    if (!back.ok() || Dump(*back) != Dump(j)) std::abort();  // a lossy round trip
    return 0;
  }
  if (!in.empty() && in[0] == 'M') {
    std::string stored(1 + ZSTD_compressBound(size - 1), '\0');
    stored[0] = 0x01;
    const size_t n = ZSTD_compress(stored.data() + 1, stored.size() - 1, data + 1, size - 1, 1);
    if (ZSTD_isError(n)) return 0;
    stored.resize(1 + n);
    auto r = cellar::DecodeBody(stored);
    if (r.ok() && cellar::JsonDepth(*r) > cellar::kMaxBodyDepth) std::abort();
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
