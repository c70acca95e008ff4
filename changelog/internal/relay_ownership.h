// Ownership primitives of the relay: MySQL named locks per shard, and member
// locks that let relays count each other (see changelog/relay.h).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "base/mutex.h"
#include "base/status.h"
#include "base/thread_annotations.h"
#include "cells/mysql_client.h"

namespace cellar::internal {

// Holds named locks on one MySQL connection. Locks vanish with the connection:
// after any Unavailable error every lock must be considered lost.
// Not thread-safe.
class NamedLocks {
 public:
  // `connect` opens the lock connection (to a host's current primary).
  using Connector = std::function<Result<std::unique_ptr<MysqlConnection>>()>;
  explicit NamedLocks(Connector connect) : connect_(std::move(connect)) {}

  // true: acquired (or already held by this connection); false: held by someone else.
  // Unavailable: the connection is gone (all locks lost).
  Result<bool> TryAcquire(const std::string& name);
  Status Release(const std::string& name);
  // Unavailable when the connection holding the locks broke.
  Status Ping();
  bool connected() const { return conn_ && !conn_->broken(); }
  void Disconnect() { conn_.reset(); }
  MysqlConnection* connection() { return conn_.get(); }
  Status EnsureConnected();

 private:
  Connector connect_;
  std::unique_ptr<MysqlConnection> conn_;
};

// Counts live relays through member-slot locks on one host. Thread-safe.
class RelayMembership {
 public:
  static constexpr int kSlots = 64;
  RelayMembership(NamedLocks::Connector connect, std::string prefix)
      : locks_(std::move(connect)), prefix_(std::move(prefix)) {}

  // Joins (takes a free slot) if not a member, then returns the number of
  // live members (>= 1). When MySQL is unreachable, assumes 1.
  int Refresh();
  void Leave();

 private:
  std::string SlotName(int k) const;
  Mutex mu_;
  NamedLocks locks_ GUARDED_BY(mu_);
  std::string prefix_;
  int slot_ GUARDED_BY(mu_) = -1;
};

}  // namespace cellar::internal
