#include "cells/body_codec.h"

#include <zstd.h>

namespace cellar {
namespace {
constexpr char kZstdMsgpack = 0x01;
constexpr unsigned long long kMaxDecodedBytes = 256ull << 20;  // guards against zip bombs
}  // namespace

std::string EncodeBody(const nlohmann::json& body) {
  std::vector<uint8_t> packed = nlohmann::json::to_msgpack(body);
  std::string out(1 + ZSTD_compressBound(packed.size()), '\0');
  out[0] = kZstdMsgpack;
  size_t n = ZSTD_compress(out.data() + 1, out.size() - 1, packed.data(), packed.size(), 3);
  // ZSTD_compress cannot fail with a bound-sized buffer.
  out.resize(1 + n);
  return out;
}

Result<nlohmann::json> DecodeBody(std::string_view stored) {
  if (stored.empty()) return InvalidArgument("stored body is empty");
  if (stored[0] != kZstdMsgpack)
    return InvalidArgument("stored body has unknown format byte " +
                           std::to_string(static_cast<unsigned char>(stored[0])));
  const char* frame = stored.data() + 1;
  size_t frame_size = stored.size() - 1;
  unsigned long long size = ZSTD_getFrameContentSize(frame, frame_size);
  if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN)
    return InvalidArgument("stored body is not a zstd frame with a known size");
  if (size > kMaxDecodedBytes) return InvalidArgument("stored body decodes to more than 256 MiB");
  std::vector<uint8_t> packed(size);
  size_t n = ZSTD_decompress(packed.data(), packed.size(), frame, frame_size);
  if (ZSTD_isError(n) || n != size)
    return InvalidArgument(std::string("stored body is a corrupt zstd frame: ") +
                           (ZSTD_isError(n) ? ZSTD_getErrorName(n) : "size mismatch"));
  nlohmann::json j =
      nlohmann::json::from_msgpack(packed, /*strict=*/true, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument("stored body is not valid MessagePack");
  return j;
}

}  // namespace cellar
