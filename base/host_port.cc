#include "base/host_port.h"

#include <optional>

#include "base/number_text.h"

namespace cellar {

Result<HostPort> ParseHostPort(std::string_view text, std::string_view what) {
  auto refuse = [&](std::string_view why) {
    return InvalidArgument(std::string(what) + " must be HOST:PORT with a port from 0 to 65535" +
                           std::string(why) + ", got '" + std::string(text) + "'");
  };
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) return refuse("");
  std::string_view host = text.substr(0, colon);
  const std::optional<int> port = ParseDecimalInteger<int>(text.substr(colon + 1));
  if (!port || *port < 0 || *port > 65535) return refuse("");
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  } else if (host.find_first_of("[]:") != std::string_view::npos) {
    return refuse(" (an IPv6 address in brackets: [::1]:8080)");
  }
  if (host.empty()) return refuse("");
  return HostPort{std::string(host), *port};
}

std::string FormatHostPort(std::string_view host, int port) {
  const std::string p = std::to_string(port);
  if (host.find(':') != std::string_view::npos) return "[" + std::string(host) + "]:" + p;
  return std::string(host) + ":" + p;
}

}  // namespace cellar
