// Body codec: how a cell's JSON body is stored in the `body` BLOB column.
//
// Format: one format byte, then the payload.
//   0x01  zstd frame (level 3) of the body's MessagePack encoding.
// MessagePack keeps integer/float distinctions and object key order (keys are
// sorted by nlohmann::json), so the same JSON encodes to the same bytes.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "base/status.h"

namespace cellar {

// Encodes any JSON value. Never fails for a valid nlohmann::json.
std::string EncodeBody(const nlohmann::json& body);

// Decodes bytes made by EncodeBody. InvalidArgument (naming what is wrong:
// empty input, unknown format byte, corrupt zstd frame, bad MessagePack) otherwise.
// Never throws, whatever the input.
Result<nlohmann::json> DecodeBody(std::string_view stored);

}  // namespace cellar
