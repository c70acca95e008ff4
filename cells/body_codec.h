// Body codec: how a cell's JSON body is stored in the `body` BLOB column.
//
// Format: one format byte, then the payload.
//   0x01  zstd frame (level 3) of the body's MessagePack encoding, for bodies
//         whose MessagePack is at least kCompressFromBytes long;
//   0x02  the MessagePack encoding itself, for smaller bodies (zstd saves a few
//         percent there and costs more CPU than the rest of a put).
// MessagePack keeps integer/float distinctions and object key order (keys are
// sorted by nlohmann::json), so the same JSON encodes to the same bytes.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace cellar {

// MessagePack size from which bodies are compressed.
inline constexpr size_t kCompressFromBytes = 1024;

// Deepest nesting of objects/arrays a body may have. The codec (nlohmann's
// MessagePack writer and reader) recurses per level, so deeper bodies are
// refused at write (InvalidArgument) and at read (never a stack overflow).
inline constexpr int kMaxBodyDepth = 100;

// Nesting depth of `value` (0 for a scalar, 1 for {} or []), counted up to
// kMaxBodyDepth + 1: anything deeper reports kMaxBodyDepth + 1. Recurses at
// most kMaxBodyDepth + 1 frames, whatever the input.
int JsonDepth(const nlohmann::json& value);

// Encodes any JSON value. Never fails for a valid nlohmann::json.
// REQUIRES: JsonDepth(body) <= kMaxBodyDepth (deeper input may exhaust the stack).
// Thread-safe; each thread keeps one zstd context for its calls.
std::string EncodeBody(const nlohmann::json& body);

// EncodeBody's bytes with the size of the body's MessagePack encoding (what
// a size limit is checked against), from one serialisation of the body.
struct EncodedBody {
  std::string stored;        // == EncodeBody(body)
  size_t msgpack_bytes = 0;  // == nlohmann::json::to_msgpack(body).size()
};
// Same contract as EncodeBody.
EncodedBody EncodeBodyMeasured(const nlohmann::json& body);

// Compact JSON text (dump() without indentation) is at most this many bytes
// per byte of the same value's MessagePack: the worst cases are `false,` in
// an array (6 chars for 1 byte) and a control character in a string (\u0001,
// 6 chars for 1 byte). Lets a size limit on the JSON text be checked from the
// MessagePack size without serialising the body again.
inline constexpr size_t kMaxJsonBytesPerMsgpackByte = 6;

// Decodes bytes made by EncodeBody. InvalidArgument (naming what is wrong:
// empty input, unknown format byte, corrupt zstd frame, bad MessagePack,
// nesting deeper than kMaxBodyDepth) otherwise.
// ResourceExhausted if no zstd context could be allocated. Never throws,
// whatever the input. Thread-safe; each thread keeps one zstd context.
Result<nlohmann::json> DecodeBody(std::string_view stored);

// Appends `s` as a JSON string literal, exactly as nlohmann::json's dump()
// prints it (no ASCII escaping; invalid UTF-8 replaced): printable ASCII
// without a quote or backslash is copied, anything else goes through the
// library's escaping. For encoders that build JSON text without a document.
void AppendJsonString(std::string& out, std::string_view s);

// The body as compact JSON text: exactly what
// DecodeBody(stored)->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
// gives, printed straight from the MessagePack without building a document
// (for readers that only pass the body on as text, like the relay: the
// document's nodes were most of its work per cell). Same errors as
// DecodeBody. Never throws, whatever the input. Thread-safe.
Result<std::string> DecodeBodyToJsonText(std::string_view stored);

}  // namespace cellar
