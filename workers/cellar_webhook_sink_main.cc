// cellar-webhook-sink: a tiny HTTP receiver for webhook triggers in local runs
// and system tests. Every event received is appended, one JSON line each, to
// --out (and logged); it answers 200. A batch POST (CloudEvents batched mode,
// triggers/webhook.h) is split: each event's "data" is a line of its own, so
// the file has one change-log event per line either way. GET /count returns
// how many events were received; 400 for a batch that is not a JSON array.
// Given secrets (--secret-env NAME, --secret-file PATH; whsec_...), it
// verifies each delivery as a Standard Webhooks receiver does
// (triggers/webhook_signature.h) and answers 401 to one that fails, recording
// nothing; GET /rejected counts them.
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
#include "base/time.h"
#include "config/command_line.h"
#include "triggers/webhook_signature.h"

int main(int argc, char** argv) {
  cellar::BlockTerminationSignals();
  CLI::App app{"cellar-webhook-sink: record webhook deliveries"};
  std::string listen = "127.0.0.1:0", out_path, ready_file;
  app.add_option("--listen", listen, "HOST:PORT (port 0: any free port)")->capture_default_str();
  app.add_option("--out", out_path, "append each delivery as a JSON line here")->required();
  app.add_option("--ready-file", ready_file, "write HOST:PORT here once listening");
  std::vector<std::string> secret_envs, secret_files;
  app.add_option("--secret-env", secret_envs,
                 "verify deliveries with the whsec_ secret in this environment variable");
  app.add_option("--secret-file", secret_files,
                 "verify deliveries with the whsec_ secret in this file");
  if (auto exit_code = cellar::ParseCommandLine(app, argc, argv)) return *exit_code;
  std::vector<cellar::WebhookSecretSource> sources;
  for (const std::string& e : secret_envs) sources.push_back({e, ""});
  for (const std::string& f : secret_files) sources.push_back({"", f});
  const cellar::Result<std::vector<std::string>> keys = cellar::LoadWebhookSecrets(sources);
  if (!keys.ok()) {
    std::cerr << "cellar-webhook-sink: " << keys.status().message() << "\n";
    return cellar::kUsageExitCode;
  }
  const cellar::Result<cellar::HostPort> listen_at = cellar::ParseHostPort(listen, "--listen");
  if (!listen_at.ok()) {
    std::cerr << "cellar-webhook-sink: " << listen_at.status().message() << "\n";
    return cellar::kUsageExitCode;
  }
  const std::string& host = listen_at->host;
  std::ofstream out(out_path, std::ios::app);
  std::mutex mu;
  std::atomic<long> received{0}, rejected{0};
  httplib::Server server;
  server.Post(".*", [&](const httplib::Request& req, httplib::Response& res) {
    if (!keys->empty()) {
      const cellar::Status verified = cellar::VerifyWebhook(
          *keys, req.get_header_value("webhook-id"), req.get_header_value("webhook-timestamp"),
          req.get_header_value("webhook-signature"), req.body, cellar::NowMicros() / 1000000);
      if (!verified.ok()) {
        ++rejected;
        cellar::LogWarn("webhook_sink", "delivery rejected",
                        {{"path", req.path}, {"error", verified.message()}});
        res.status = 401;
        res.set_content(nlohmann::json{{"error", verified.message()}}.dump(), "application/json");
        return;
      }
    }
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
  server.Get("/rejected", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(std::to_string(rejected.load()) + "\n", "text/plain");
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
