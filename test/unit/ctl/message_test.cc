// SPDX-License-Identifier: BSD-3-Clause
// parse_message: every rejection reason, on raw buffers; TypeTable rules.
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "ctl/message.h"

namespace uroce::ctl {
namespace {

std::vector<uint8_t> packet(uint16_t type, size_t payload, uint32_t num_fds = 0) {
  std::vector<uint8_t> b(sizeof(MsgHeader) + payload, 0xab);
  MsgHeader h{};
  h.magic = kMagic;
  h.version = kProtoVersion;
  h.type = type;
  h.length = static_cast<uint32_t>(b.size());
  h.request_id = 42;
  h.num_fds = num_fds;
  std::memcpy(b.data(), &h, sizeof(h));
  return b;
}

MsgHeader *hdr(std::vector<uint8_t> &b) {
  return reinterpret_cast<MsgHeader *>(b.data());
}

CtlError parse(const std::vector<uint8_t> &b, size_t nfds = 0) {
  static const TypeTable t = TypeTable::defaults();
  MsgHeader out;
  return parse_message(b.data(), b.size(), nfds, t, &out);
}

TEST(CtlParse, AcceptsWellFormed) {
  auto b = packet(kHello, sizeof(HelloPayload));
  MsgHeader out{};
  ASSERT_EQ(parse_message(b.data(), b.size(), 0, TypeTable::defaults(), &out), CtlError::kOk);
  EXPECT_EQ(out.type, kHello);
  EXPECT_EQ(out.request_id, 42u);
  EXPECT_EQ(parse(packet(kPing, 0)), CtlError::kOk);
  EXPECT_EQ(parse(packet(kPing, kMaxPayload)), CtlError::kOk);
  EXPECT_EQ(parse(packet(kPing, 10, kMaxFds), kMaxFds), CtlError::kOk);
  EXPECT_EQ(parse(packet(kShutdown, 0)), CtlError::kOk);
  EXPECT_EQ(parse(packet(kHelloReply, sizeof(HelloReplyPayload))), CtlError::kOk);
  EXPECT_EQ(parse(packet(kHelloReply, 0)), CtlError::kOk);
}

TEST(CtlParse, RejectsEachDefect) {
  std::vector<uint8_t> b = packet(kPing, 8);
  EXPECT_EQ(parse(std::vector<uint8_t>(b.begin(), b.begin() + 31)), CtlError::kShort);
  EXPECT_EQ(parse(std::vector<uint8_t>()), CtlError::kShort);
  EXPECT_EQ(parse(packet(kPing, kMaxPayload + 1)), CtlError::kTooLong);

  b = packet(kPing, 8);
  hdr(b)->magic = 0x4c544355;  // byte-swapped magic
  EXPECT_EQ(parse(b), CtlError::kBadMagic);
  b = packet(kPing, 8);
  hdr(b)->version = kProtoVersion + 1;
  EXPECT_EQ(parse(b), CtlError::kBadVersion);
  b = packet(kPing, 8);
  hdr(b)->length += 1;
  EXPECT_EQ(parse(b), CtlError::kLengthMismatch);
  b = packet(kPing, 8);
  hdr(b)->length = 0;
  EXPECT_EQ(parse(b), CtlError::kLengthMismatch);
  b = packet(kPing, 8);
  hdr(b)->flags = 1;
  EXPECT_EQ(parse(b), CtlError::kBadFlags);
  b = packet(0x7777, 8);
  EXPECT_EQ(parse(b), CtlError::kUnknownType);
  EXPECT_EQ(parse(packet(kHello, sizeof(HelloPayload) - 1)), CtlError::kBadPayload);
  EXPECT_EQ(parse(packet(kHello, sizeof(HelloPayload) + 1)), CtlError::kBadPayload);
  EXPECT_EQ(parse(packet(kShutdown, 1)), CtlError::kBadPayload);
  // fd accounting: header vs. received, and per-type limit.
  EXPECT_EQ(parse(packet(kPing, 8, 0), 1), CtlError::kFdCountMismatch);
  EXPECT_EQ(parse(packet(kPing, 8, 2), 1), CtlError::kFdCountMismatch);
  EXPECT_EQ(parse(packet(kHello, sizeof(HelloPayload), 1), 1), CtlError::kTooManyFds);
  EXPECT_EQ(parse(packet(kPing, 8, kMaxFds + 1), kMaxFds + 1), CtlError::kTooManyFds);
}

TEST(CtlParse, TypeTableRules) {
  TypeTable t = TypeTable::defaults();
  EXPECT_NE(t.find(kHello), nullptr);
  EXPECT_EQ(t.find(kFirstVerbsType), nullptr);
  EXPECT_FALSE(t.add({kFirstVerbsType, 10, 5, 0}));               // max < min
  EXPECT_FALSE(t.add({kFirstVerbsType, 0, kMaxPayload + 1, 0}));  // too big
  EXPECT_FALSE(t.add({kFirstVerbsType, 0, 8, kMaxFds + 1}));      // too many fds
  ASSERT_TRUE(t.add({kFirstVerbsType, 8, 16, 1}));
  auto b = packet(kFirstVerbsType, 12, 1);
  MsgHeader out;
  EXPECT_EQ(parse_message(b.data(), b.size(), 1, t, &out), CtlError::kOk);
  ASSERT_TRUE(t.add({kFirstVerbsType, 8, 8, 1}));  // replace
  EXPECT_EQ(parse_message(b.data(), b.size(), 1, t, &out), CtlError::kBadPayload);
  TypeTable full;
  for (size_t i = 0; i < TypeTable::kCapacity; ++i)
    ASSERT_TRUE(full.add({static_cast<uint16_t>(0x100 + i), 0, 0, 0}));
  EXPECT_FALSE(full.add({0x7000, 0, 0, 0}));
}

TEST(CtlParse, ErrorStringsAreDistinct) {
  for (int i = 0; i <= static_cast<int>(CtlError::kIo); ++i) {
    for (int j = i + 1; j <= static_cast<int>(CtlError::kIo); ++j) {
      EXPECT_STRNE(ctl_error_str(static_cast<CtlError>(i)),
                   ctl_error_str(static_cast<CtlError>(j)));
    }
  }
}

}  // namespace
}  // namespace uroce::ctl
