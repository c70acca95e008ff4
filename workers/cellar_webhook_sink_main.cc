// cellar-webhook-sink: a tiny HTTP receiver for webhook triggers in local runs
// and system tests. Every POST body is appended, one JSON line each, to --out
// (and logged); it answers 200. GET /count returns how many were received.
//   cellar-webhook-sink --listen 127.0.0.1:0 --ready-file F --out events.jsonl
#include <httplib.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <fstream>
#include <mutex>
#include <thread>

#include "base/atomic_file.h"
#include "base/log.h"
#include "base/signal_wait.h"

int main(int argc, char** argv) {
  cellar::BlockTerminationSignals();
  CLI::App app{"cellar-webhook-sink: record webhook deliveries"};
  std::string listen = "127.0.0.1:0", out_path, ready_file;
  app.add_option("--listen", listen, "HOST:PORT (port 0: any free port)")->capture_default_str();
  app.add_option("--out", out_path, "append each delivery as a JSON line here")->required();
  app.add_option("--ready-file", ready_file, "write HOST:PORT here once listening");
  CLI11_PARSE(app, argc, argv);
  auto colon = listen.rfind(':');
  if (colon == std::string::npos) {
    std::cerr << "cellar-webhook-sink: --listen must be HOST:PORT\n";
    return 2;
  }
  const std::string host = listen.substr(0, colon);
  std::ofstream out(out_path, std::ios::app);
  std::mutex mu;
  std::atomic<long> received{0};
  httplib::Server server;
  server.Post(".*", [&](const httplib::Request& req, httplib::Response& res) {
    std::string line = req.body;
    for (char& c : line)
      if (c == '\n') c = ' ';
    {
      std::lock_guard<std::mutex> lock(mu);
      out << line << "\n";
      out.flush();
    }
    received++;
    cellar::LogInfo("webhook_sink", "delivery",
                    {{"path", req.path},
                     {"trigger", req.get_header_value("X-Cellar-Trigger")},
                     {"event", req.get_header_value("X-Cellar-Event-Id")}});
    res.set_content("{\"ok\":true}", "application/json");
  });
  server.Get("/count", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(std::to_string(received.load()) + "\n", "text/plain");
  });
  int port = std::atoi(listen.c_str() + colon + 1);
  if (port == 0)
    port = server.bind_to_any_port(host.c_str());
  else if (!server.bind_to_port(host.c_str(), port))
    port = -1;
  if (port <= 0) {
    std::cerr << "cellar-webhook-sink: cannot listen on " << listen << "\n";
    return 1;
  }
  std::thread t([&] { server.listen_after_bind(); });
  const std::string addr = host + ":" + std::to_string(port);
  if (!ready_file.empty()) cellar::WriteFileAtomically(ready_file, addr + "\n").IgnoreError();
  cellar::LogInfo("webhook_sink", "listening", {{"address", addr}});
  while (cellar::WaitForTerminationSignal(1000) == 0) {
  }
  server.stop();
  t.join();
  return 0;
}
