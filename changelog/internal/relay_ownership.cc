#include "changelog/internal/relay_ownership.h"

namespace cellar::internal {

Status NamedLocks::EnsureConnected() {
  if (connected()) return Status::Ok();
  conn_.reset();
  CELLAR_ASSIGN_OR_RETURN(conn_, connect_());
  return Status::Ok();
}

Result<bool> NamedLocks::TryAcquire(const std::string& name) {
  CELLAR_RETURN_IF_ERROR(EnsureConnected());
  CELLAR_ASSIGN_OR_RETURN(auto rows, conn_->Query("SELECT GET_LOCK(?, 0)", {name}));
  return !rows.empty() && rows[0].Int(0) == 1;
}

Status NamedLocks::Release(const std::string& name) {
  if (!connected()) return Status::Ok();
  return conn_->Query("SELECT RELEASE_LOCK(?)", {name}).status();
}

Status NamedLocks::Ping() {
  if (!connected()) return Unavailable("lock connection is closed");
  return conn_->Query("SELECT 1").status();
}

std::string RelayMembership::SlotName(int k) const {
  return "cellar_relay_member:" + prefix_.substr(0, 40) + ":" + std::to_string(k);
}

int RelayMembership::Refresh() {
  MutexLock lock(&mu_);
  if (!locks_.connected()) slot_ = -1;  // a new connection holds no slot
  if (!locks_.EnsureConnected().ok()) return 1;
  if (slot_ < 0) {
    for (int k = 0; k < kSlots && slot_ < 0; ++k) {
      auto got = locks_.TryAcquire(SlotName(k));
      if (!got.ok()) return 1;
      if (*got) slot_ = k;
    }
  }
  std::string sql = "SELECT 0";
  std::vector<SqlParam> params;
  for (int k = 0; k < kSlots; ++k) {
    sql += " + (IS_USED_LOCK(?) IS NOT NULL)";
    params.emplace_back(SlotName(k));
  }
  auto rows = locks_.connection()->Query(sql, params);
  if (!rows.ok() || rows->empty()) return 1;
  return std::max<int>(1, static_cast<int>((*rows)[0].Int(0)));
}

void RelayMembership::Leave() {
  MutexLock lock(&mu_);
  if (slot_ >= 0) locks_.Release(SlotName(slot_)).IgnoreError();
  slot_ = -1;
  locks_.Disconnect();
}

}  // namespace cellar::internal
