#include "cells/body_codec.h"

#include <zstd.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "cells/internal/msgpack_json_text.h"

namespace cellar {
namespace {
constexpr char kZstdMsgpack = 0x01;
constexpr char kPlainMsgpack = 0x02;
constexpr unsigned long long kMaxDecodedBytes = 256ull << 20;  // guards against zip bombs
// Checks nesting before the recursive DOM decoder runs: stops at the first
// container deeper than kMaxBodyDepth, so its own recursion stays bounded.
class DepthCheck : public nlohmann::json_sax<nlohmann::json> {
 public:
  bool too_deep = false;
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return Enter(); }
  bool key(string_t&) override { return true; }
  bool end_object() override { return Leave(); }
  bool start_array(std::size_t) override { return Enter(); }
  bool end_array() override { return Leave(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

 private:
  bool Enter() {
    if (++depth_ > kMaxBodyDepth) too_deep = true;
    return !too_deep;
  }
  bool Leave() {
    --depth_;
    return true;
  }
  int depth_ = 0;
};

}  // namespace

namespace {
// Depth of `value`, counting no further than `limit` + 1 levels below the
// caller's, so the recursion stays bounded whatever the input. It walks the
// containers themselves: nlohmann's generic iterator (std::advance and a type
// switch per element) made this check cost as much as the encoding after it.
int DepthUpTo(const nlohmann::json& value, int limit) {
  if (!value.is_structured()) return 0;
  int deepest = 0;
  auto visit = [&](const nlohmann::json& child) {
    if (child.is_structured()) deepest = std::max(deepest, DepthUpTo(child, limit - 1));
  };
  if (limit > 0) {
    if (const auto* object = value.get_ptr<const nlohmann::json::object_t*>())
      for (const auto& member : *object) visit(member.second);
    else
      for (const auto& element : *value.get_ptr<const nlohmann::json::array_t*>()) visit(element);
  }
  return deepest + 1;
}
}  // namespace

int JsonDepth(const nlohmann::json& value) {
  // Recursion bounded by kMaxBodyDepth + 1 frames; deeper input reports
  // kMaxBodyDepth + 1 (all a caller checking the limit needs) without a heap
  // stack per call, which was most of the check's cost on small bodies.
  return DepthUpTo(value, kMaxBodyDepth);
}

namespace {
// This thread's zstd context of type Context, made on first use and reused by
// every later call on the thread (a fresh one per call, what ZSTD_compress
// and ZSTD_decompress make, costs more than a small body's work: 15 of a
// 16.6 us decode of a 1 KiB body). Null if it could not be allocated; the
// next call tries again.
template <typename Context, Context* (*Create)(), size_t (*Free)(Context*)>
Context* ThisThreadContext() {
  struct Deleter {
    void operator()(Context* c) const { Free(c); }
  };
  thread_local std::unique_ptr<Context, Deleter> context;
  if (!context) context.reset(Create());
  return context.get();
}
}  // namespace

std::string EncodeBody(const nlohmann::json& body) { return EncodeBodyMeasured(body).stored; }

EncodedBody EncodeBodyMeasured(const nlohmann::json& body) {
  // nlohmann's writer appends byte by byte: into a per-thread scratch buffer
  // that keeps its capacity, behind the format byte; then one copy (plain)
  // or the compression (zstd) reads it from there.
  thread_local std::string scratch;
  scratch.assign(1, kPlainMsgpack);
  nlohmann::json::to_msgpack(body, nlohmann::detail::output_adapter<char>(scratch));
  EncodedBody out;
  out.msgpack_bytes = scratch.size() - 1;
  if (out.msgpack_bytes < kCompressFromBytes) {
    // zstd saves a few percent on a small body and costs more CPU than the
    // rest of a put: small bodies are stored as plain MessagePack.
    out.stored = scratch;
  } else {
    out.stored.assign(1 + ZSTD_compressBound(out.msgpack_bytes), '\0');
    out.stored[0] = kZstdMsgpack;
    char* dst = out.stored.data() + 1;
    const size_t capacity = out.stored.size() - 1;
    const char* src = scratch.data() + 1;
    ZSTD_CCtx* context = ThisThreadContext<ZSTD_CCtx, ZSTD_createCCtx, ZSTD_freeCCtx>();
    size_t n = context != nullptr
                   ? ZSTD_compressCCtx(context, dst, capacity, src, out.msgpack_bytes, 3)
                   : ZSTD_compress(dst, capacity, src, out.msgpack_bytes, 3);
    // With a bound-sized buffer only an allocation can fail: then store it plain.
    if (ZSTD_isError(n))
      out.stored = scratch;
    else
      out.stored.resize(1 + n);
  }
  if (scratch.capacity() > (1u << 20)) std::string().swap(scratch);  // do not pin a huge body
  return out;
}

namespace {

// The MessagePack bytes of a stored body: a view into `stored` (plain) or
// into `*unpacked` (zstd). InvalidArgument as DecodeBody documents.
Result<std::string_view> UnpackStored(std::string_view stored, std::string* unpacked) {
  if (stored.empty()) return InvalidArgument("stored body is empty");
  if (stored[0] != kZstdMsgpack && stored[0] != kPlainMsgpack)
    return InvalidArgument("stored body has unknown format byte " +
                           std::to_string(static_cast<unsigned char>(stored[0])));
  if (stored[0] == kPlainMsgpack) return stored.substr(1);
  const char* frame = stored.data() + 1;
  size_t frame_size = stored.size() - 1;
  unsigned long long size = ZSTD_getFrameContentSize(frame, frame_size);
  if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN)
    return InvalidArgument("stored body is not a zstd frame with a known size");
  if (size > kMaxDecodedBytes) return InvalidArgument("stored body decodes to more than 256 MiB");
  unpacked->resize(size);
  ZSTD_DCtx* context = ThisThreadContext<ZSTD_DCtx, ZSTD_createDCtx, ZSTD_freeDCtx>();
  if (context == nullptr) return ResourceExhausted("no memory for a zstd decompression context");
  size_t n = ZSTD_decompressDCtx(context, unpacked->data(), unpacked->size(), frame, frame_size);
  if (ZSTD_isError(n) || n != size)
    return InvalidArgument(std::string("stored body is a corrupt zstd frame: ") +
                           (ZSTD_isError(n) ? ZSTD_getErrorName(n) : "size mismatch"));
  return std::string_view(*unpacked);
}

Result<nlohmann::json> DecodePacked(std::string_view packed) {
  const auto* begin = reinterpret_cast<const uint8_t*>(packed.data());
  const auto* end = begin + packed.size();
  DepthCheck depth;
  nlohmann::json::sax_parse(begin, end, &depth, nlohmann::json::input_format_t::msgpack,
                            /*strict=*/true);
  if (depth.too_deep)
    return InvalidArgument("stored body nests deeper than " + std::to_string(kMaxBodyDepth) +
                           " levels");
  nlohmann::json j =
      nlohmann::json::from_msgpack(begin, end, /*strict=*/true, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument("stored body is not valid MessagePack");
  return j;
}

}  // namespace

void AppendJsonString(std::string& out, std::string_view s) {
  for (unsigned char c : s)
    if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') {
      // One printer per thread: dump() builds a serializer (a locale lookup,
      // its buffers) per call, which cost as much again as the escaping on
      // the relay's path of every non-ASCII string of a body.
      thread_local std::string escaped;
      thread_local nlohmann::detail::serializer<nlohmann::json> printer(
          nlohmann::detail::output_adapter<char>(escaped), ' ',
          nlohmann::json::error_handler_t::replace);
      escaped.clear();
      printer.dump(nlohmann::json(std::string(s)), false, false, 0);
      out += escaped;
      return;
    }
  out += '"';
  out += s;
  out += '"';
}

Result<nlohmann::json> DecodeBody(std::string_view stored) {
  std::string unpacked;
  CELLAR_ASSIGN_OR_RETURN(std::string_view packed, UnpackStored(stored, &unpacked));
  return DecodePacked(packed);
}

Result<std::string> DecodeBodyToJsonText(std::string_view stored) {
  std::string unpacked;
  CELLAR_ASSIGN_OR_RETURN(std::string_view packed, UnpackStored(stored, &unpacked));
  if (std::optional<std::string> text = internal::MsgpackToJsonText(packed)) return *text;
  // Keys out of a document's order, a binary value, or an error: the
  // document's way decides (and names the error as DecodeBody does).
  CELLAR_ASSIGN_OR_RETURN(nlohmann::json j, DecodePacked(packed));
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace cellar
