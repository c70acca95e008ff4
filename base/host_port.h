// "HOST:PORT" text, as the programs' --listen and --metrics-address take it.
// One parser, so that every program reads an address the same way: the last
// ':' splits, an IPv6 literal is written in brackets ("[::1]:8080"), and the
// port is decimal (base/number_text.h).
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"

namespace cellar {

struct HostPort {
  std::string host;  // a name or an address; an IPv6 literal without brackets
  int port = 0;      // 0..65535; 0 asks the system for any free port
};

// Parses "host:port" or "[ipv6]:port". `what` names the text in the error,
// e.g. "--listen".
// On success: the host (brackets removed) and the port.
// InvalidArgument "<what> must be HOST:PORT with a port from 0 to 65535, got
// '<text>'" when the host is empty, the port is missing or not a decimal
// number in range, or the host holds a ':' outside brackets (an IPv6 literal
// must be bracketed, else its last group would be read as the port).
Result<HostPort> ParseHostPort(std::string_view text, std::string_view what);

// The inverse: "host:port", or "[host]:port" when host holds a ':'.
std::string FormatHostPort(std::string_view host, int port);

}  // namespace cellar
