// trip-client: the README's first tutorial in C++ (cellar::Client over the
// worker nodes' HTTP API). Writes a trip's BASE cell, reads it back, writes a
// second version and lists both.
//   trip-client http://127.0.0.1:PORT
#include <iostream>

#include "client/cellar_client.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: trip-client http://HOST:PORT\n";
    return 2;
  }
  // [readme: client]
  cellar::ClientOptions options;
  options.endpoints = {argv[1]};  // every worker node; calls fail over between them
  auto client = cellar::Client::Create(options).value();

  const cellar::Uuid trip = cellar::Uuid::Random();
  auto put = client->Put("trips", {trip, "BASE", 1, {{"fare", {{"total", 23.5}}}}});
  if (!put.ok()) {
    std::cerr << put.status().ToString() << "\n";  // e.g. Conflict: another body at this address
    return 1;
  }
  client->Put("trips", {trip, "BASE", 2, {{"fare", {{"total", 25.0}}}}}).value();

  cellar::Cell latest = client->Latest("trips", trip, "BASE").value();
  std::cout << "latest: ref_key " << latest.ref_key << ", fare " << latest.body["fare"]["total"]
            << "\n";
  for (const cellar::Cell& c : client->Versions("trips", trip, "BASE", {}).value())
    std::cout << "version " << c.ref_key << " written at " << cellar::FormatRfc3339(c.created_at)
              << "\n";
  // [end]
  return 0;
}
