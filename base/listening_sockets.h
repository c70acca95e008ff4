// Socket options on listening sockets this process opened through a library
// that does not expose them (librdkafka's mock cluster, the local broker).
#pragma once

#include <string>
#include <vector>

namespace cellar {

// Sets TCP_NODELAY on every listening TCP socket of this process bound to
// one of `ports`; connections accepted from then on inherit it (Linux). Kafka
// brokers set TCP_NODELAY on their connections; librdkafka's mock cluster does
// not, so its small responses waited for Nagle and the client's delayed ACK
// (~40 ms each). Returns how many sockets were changed; 0 when /proc is not
// readable. Thread-safe (reads /proc/self/fd).
int SetNoDelayOnListeningSockets(const std::vector<int>& ports);
// The same for the ports of a bootstrap list "host:port[,host:port]".
int SetNoDelayOnListeningSockets(const std::string& bootstrap);

}  // namespace cellar
