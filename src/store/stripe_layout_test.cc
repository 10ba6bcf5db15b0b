#include "tenax/store/stripe_layout.h"

#include <gtest/gtest.h>

namespace tenax::store {
namespace {

// Every record sits in exactly one data chunk, in order, and every chunk's
// bytes are its records' bytes; parity has the stripe's coded length.
TEST(StripeLayout, EveryRecordIsInExactlyOneDataChunkInOrder) {
  for (uint64_t records : {uint64_t{1}, uint64_t{127}, uint64_t{128}, uint64_t{1000}, uint64_t{60000}}) {
    LayoutParams p;
    p.records = records;
    p.record_bytes = 785;  // a Fashion-MNIST image and its label
    p.chunk_bytes = 100000;
    auto layout = StripeLayout::Create(p);
    ASSERT_TRUE(layout.ok()) << layout.status().message();
    EXPECT_EQ(layout->records_per_chunk(), 127u);
    uint64_t next = 0, stored = 0;
    for (uint64_t s = 0; s < layout->stripes(); ++s) {
      const auto chunks = layout->ChunksOf(s);
      ASSERT_EQ(chunks.size(), 6u);
      for (const ChunkRange& c : chunks) {
        EXPECT_EQ(c.stripe, s);
        if (c.index < 4) {
          EXPECT_EQ(c.first_record, next) << "stripe " << s << " chunk " << c.index;
          EXPECT_LE(c.record_count, 127u);
          EXPECT_EQ(c.payload_bytes, c.record_count * 785);
          EXPECT_LE(c.payload_bytes, layout->CodedBytes(s));
          for (uint64_t r = c.first_record; r < c.first_record + c.record_count; r += 50) {
            const ChunkRange back = layout->ChunkOfRecord(r);
            EXPECT_EQ(back.stripe, s);
            EXPECT_EQ(back.index, c.index);
          }
          next += c.record_count;
          stored += c.payload_bytes;
        } else {
          EXPECT_EQ(c.record_count, 0u);
          EXPECT_EQ(c.payload_bytes, layout->CodedBytes(s));
        }
      }
    }
    EXPECT_EQ(next, records);
    EXPECT_EQ(stored, records * 785);
    EXPECT_EQ(layout->stripes(), (records + 4 * 127 - 1) / (4 * 127));
  }
}

TEST(StripeLayout, ImpossibleParametersSayWhatWouldWork) {
  LayoutParams p;
  p.records = 10;
  p.record_bytes = 785;
  p.chunk_bytes = 100;
  auto small = StripeLayout::Create(p);
  ASSERT_FALSE(small.ok());
  EXPECT_NE(small.status().message().find("at least one record"), std::string::npos);
  p.chunk_bytes = 1000;
  p.records = 0;
  EXPECT_FALSE(StripeLayout::Create(p).ok());
  p.records = 10;
  p.k = 250;
  p.m = 10;
  auto big = StripeLayout::Create(p);
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("k + m <= 255"), std::string::npos);
}

}  // namespace
}  // namespace tenax::store
