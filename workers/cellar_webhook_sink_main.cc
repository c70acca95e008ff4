// cellar-webhook-sink: a tiny HTTP receiver for webhook triggers in local runs
// and system tests. Every event received is appended, one JSON line each, to
// --out (and logged); it answers 200. A batch POST (CloudEvents batched mode,
// triggers/webhook.h) is split: each event's "data" is a line of its own, so
// the file has one change-log event per line either way. GET /count returns
// how many events were received; 400 for a batch that is not a JSON array.
//   cellar-webhook-sink --listen 127.0.0.1:0 --ready-file F --out events.jsonl
#include <httplib.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "base/atomic_file.h"
#include "base/host_port.h"
#include "base/log.h"
#include "base/signal_wait.h"
#include "config/command_line.h"

int main(int argc, char** argv) {
  cellar::BlockTerminationSignals();
  CLI::App app{"cellar-webhook-sink: record webhook deliveries"};
  std::string listen = "127.0.0.1:0", out_path, ready_file;
  app.add_option("--listen", listen, "HOST:PORT (port 0: any free port)")->capture_default_str();
  app.add_option("--out", out_path, "append each delivery as a JSON line here")->required();
  app.add_option("--ready-file", ready_file, "write HOST:PORT here once listening");
  if (auto exit_code = cellar::ParseCommandLine(app, argc, argv)) return *exit_code;
  const cellar::Result<cellar::HostPort> listen_at = cellar::ParseHostPort(listen, "--listen");
  if (!listen_at.ok()) {
    std::cerr << "cellar-webhook-sink: " << listen_at.status().message() << "\n";
    return cellar::kUsageExitCode;
  }
  const std::string& host = listen_at->host;
  std::ofstream out(out_path, std::ios::app);
  std::mutex mu;
  std::atomic<long> received{0};
  httplib::Server server;
  server.Post(".*", [&](const httplib::Request& req, httplib::Response& res) {
    std::vector<std::string> lines;
    if (req.get_header_value("Content-Type").rfind("application/cloudevents-batch+json", 0) == 0) {
      auto batch = nlohmann::json::parse(req.body, nullptr, /*allow_exceptions=*/false);
      if (!batch.is_array()) {
        res.status = 400;
        res.set_content("{\"error\":\"a batch must be a JSON array\"}", "application/json");
        return;
      }
      for (const auto& event : batch) lines.push_back(event.value("data", nlohmann::json()).dump());
    } else {
      lines.push_back(req.body);
      for (char& c : lines.back())
        if (c == '\n') c = ' ';
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      for (const std::string& line : lines) out << line << "\n";
      out.flush();
    }
    received += static_cast<long>(lines.size());
    cellar::LogInfo("webhook_sink", "delivery",
                    {{"path", req.path},
                     {"trigger", req.get_header_value("X-Cellar-Trigger")},
                     {"event", req.get_header_value("X-Cellar-Event-Id")},
                     {"events", std::to_string(lines.size())}});
    res.set_content("{\"ok\":true}", "application/json");
  });
  server.Get("/count", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(std::to_string(received.load()) + "\n", "text/plain");
  });
  int port = listen_at->port;
  if (port == 0)
    port = server.bind_to_any_port(host.c_str());
  else if (!server.bind_to_port(host.c_str(), port))
    port = -1;
  if (port <= 0) {
    std::cerr << "cellar-webhook-sink: cannot listen on " << listen << "\n";
    return 1;
  }
  std::thread t([&] { server.listen_after_bind(); });
  const std::string addr = cellar::FormatHostPort(host, port);
  if (!ready_file.empty()) cellar::WriteFileAtomically(ready_file, addr + "\n").IgnoreError();
  cellar::LogInfo("webhook_sink", "listening", {{"address", addr}});
  while (cellar::WaitForTerminationSignal(1000) == 0) {
  }
  server.stop();
  t.join();
  return 0;
}
