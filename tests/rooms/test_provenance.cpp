// The driver room's provenance table, without a process: what produced a descriptor's bytes, by content hash.
#include <gtest/gtest.h>

#include "driver/provenance.h"

namespace tmaguard {
namespace {

TEST(Provenance, ARecordedHashIsFoundWithItsEntryPoint) {
  provenance_record(0x1234'5678'9abc'def0ULL, {EncodeApi::kTiled, false});
  provenance_record(0x0fed'cba9'8765'4320ULL, {EncodeApi::kIm2col, true});
  const Provenance a = provenance_lookup(0x1234'5678'9abc'def0ULL);
  EXPECT_EQ(a.api, EncodeApi::kTiled);
  EXPECT_FALSE(a.replaced);
  const Provenance b = provenance_lookup(0x0fed'cba9'8765'4320ULL);
  EXPECT_EQ(b.api, EncodeApi::kIm2col);
  EXPECT_TRUE(b.replaced);
  EXPECT_NE(provenance_for(0x1234'5678'9abc'def0ULL).find(encode_api_name(EncodeApi::kTiled)), std::string::npos);
}

TEST(Provenance, AnUnknownHashIsNoEncodeCall) {
  EXPECT_EQ(provenance_lookup(0x5555'0000'1111'2222ULL).api, EncodeApi::kNone);
  EXPECT_FALSE(provenance_for(0x5555'0000'1111'2222ULL).empty());
}

TEST(Provenance, TheTableIsBoundedAndTheNewestRecordsStay) {
  // Far more records than the table holds: it keeps a bounded number, never fails, and the latest ones are found.
  constexpr uint64_t kMany = 100000;
  for (uint64_t i = 0; i < kMany; ++i) provenance_record(0x9e3779b97f4a7c15ULL * (i + 1), {EncodeApi::kTiled, false});
  std::size_t found = 0, newest = 0;
  for (uint64_t i = 0; i < kMany; ++i)
    if (provenance_lookup(0x9e3779b97f4a7c15ULL * (i + 1)).api == EncodeApi::kTiled) {
      ++found;
      newest += i >= kMany - 64;
    }
  EXPECT_LT(found, kMany / 4) << "the table grew with the records";
  EXPECT_GT(found, 0u);
  EXPECT_EQ(newest, 64u) << "the most recent records were evicted";
}

}  // namespace
}  // namespace tmaguard
