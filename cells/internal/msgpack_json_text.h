// MessagePack to compact JSON text without a document in between: the body
// codec's fast path for readers that pass a body on as text
// (DecodeBodyToJsonText in cells/body_codec.h).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace cellar::internal {

// The text nlohmann::json::from_msgpack(msgpack).dump(-1, ' ', false,
// error_handler_t::replace) prints, when this function can vouch for it:
// every object's keys come strictly increasing (a document sorts its keys and
// keeps one of each; EncodeBody writes them that way), no value is binary,
// nesting stays within kMaxBodyDepth and the input is exactly one valid
// MessagePack value. Anything else is nullopt, and the caller goes through the
// document, which also names the error. Never throws. Thread-safe.
std::optional<std::string> MsgpackToJsonText(std::string_view msgpack);

}  // namespace cellar::internal
