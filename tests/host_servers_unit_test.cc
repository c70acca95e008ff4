// GTID positions (cells/host_servers.h): what a failover compares.
#include <gtest/gtest.h>

#include "cells/host_servers.h"

namespace cellar {
namespace {

TEST(GtidPositionTest, CoversPerDomainAndHistoryPerServer) {
  auto primary = GtidPosition::Parse("0-1-500,0-2-900,1-2-7");  // a gtid_binlog_state
  ASSERT_TRUE(primary.ok()) << primary.status().ToString();
  auto caught_up = GtidPosition::Parse("0-2-900");
  auto behind = GtidPosition::Parse("0-1-400");
  auto stray = GtidPosition::Parse("0-1-501");   // a commit of server 1 the primary lacks
  auto foreign = GtidPosition::Parse("0-3-10");  // a server the primary never heard of
  auto other_domain = GtidPosition::Parse("2-2-1");
  ASSERT_TRUE(caught_up.ok() && behind.ok() && stray.ok() && foreign.ok() && other_domain.ok());
  EXPECT_TRUE(primary->HistoryHolds(*caught_up));
  EXPECT_TRUE(primary->HistoryHolds(*behind));
  EXPECT_FALSE(primary->HistoryHolds(*stray));
  EXPECT_FALSE(primary->HistoryHolds(*foreign));
  EXPECT_FALSE(primary->HistoryHolds(*other_domain));
  // Covers compares the highest sequence number per domain only: a stray
  // commit with a lower number than the primary's is not seen by it.
  EXPECT_TRUE(primary->Covers(*stray));
  EXPECT_TRUE(primary->Covers(*foreign));
  EXPECT_FALSE(primary->Covers(*other_domain));
  EXPECT_TRUE(GtidPosition::Parse("")->HistoryHolds(*GtidPosition::Parse("")));
  for (const char* bad : {"0-1", "x-1-2", "0--2", "0-1-2,junk"})
    EXPECT_FALSE(GtidPosition::Parse(bad).ok()) << bad;
}

}  // namespace
}  // namespace cellar
