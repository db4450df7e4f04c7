// SPDX-License-Identifier: BSD-3-Clause
#include "wire/opcode.h"

#include <gtest/gtest.h>

#include <set>

namespace uroce::wire {
namespace {

// The opcodes IBTA defines (Vol. 1 table 38) for RC, UC and UD, plus the RoCE v2 CNP.
const std::set<int> kDefined = {0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09,
                                0x0A, 0x0B, 0x0C, 0x0D, 0x0E, 0x0F, 0x10, 0x11, 0x12, 0x13,
                                0x14, 0x16, 0x17, 0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26,
                                0x27, 0x28, 0x29, 0x2A, 0x2B, 0x64, 0x65, 0x81};

TEST(Opcode, ExactlyTheDefinedOpcodesAreValid) {
  for (int i = 0; i < 256; ++i) {
    EXPECT_EQ(opcode_info(static_cast<uint8_t>(i)).valid(), kDefined.count(i) == 1) << i;
    if (opcode_info(static_cast<uint8_t>(i)).valid()) {
      EXPECT_NE(opcode_info(static_cast<uint8_t>(i)).name, nullptr);
    }
  }
}

TEST(Opcode, HeaderLengthsMatchIbta) {
  // BTH 12, RETH 16, AETH 4, AtomicETH 28, AtomicAckETH 8, ImmDt 4, IETH 4, DETH 8.
  EXPECT_EQ(opcode_info(op::kRcSendOnly).hdr_len, 12);
  EXPECT_EQ(opcode_info(op::kRcSendOnlyImm).hdr_len, 16);
  EXPECT_EQ(opcode_info(op::kRcWriteOnly).hdr_len, 28);
  EXPECT_EQ(opcode_info(op::kRcWriteOnlyImm).hdr_len, 32);
  EXPECT_EQ(opcode_info(op::kRcWriteMiddle).hdr_len, 12);
  EXPECT_EQ(opcode_info(op::kRcWriteLastImm).hdr_len, 16);
  EXPECT_EQ(opcode_info(op::kRcReadRequest).hdr_len, 28);
  EXPECT_EQ(opcode_info(op::kRcReadResponseFirst).hdr_len, 16);
  EXPECT_EQ(opcode_info(op::kRcReadResponseMiddle).hdr_len, 12);
  EXPECT_EQ(opcode_info(op::kRcAck).hdr_len, 16);
  EXPECT_EQ(opcode_info(op::kRcAtomicAck).hdr_len, 24);
  EXPECT_EQ(opcode_info(op::kRcCompareSwap).hdr_len, 40);
  EXPECT_EQ(opcode_info(op::kRcFetchAdd).hdr_len, 40);
  EXPECT_EQ(opcode_info(op::kRcSendOnlyInv).hdr_len, 16);
  EXPECT_EQ(opcode_info(op::kUdSendOnly).hdr_len, 20);
  EXPECT_EQ(opcode_info(op::kUdSendOnlyImm).hdr_len, 24);
  EXPECT_EQ(opcode_info(op::kCnp).hdr_len, 28);
  // Offsets: ImmDt follows RETH, AtomicAckETH follows AETH, ImmDt follows DETH.
  EXPECT_EQ(opcode_info(op::kRcWriteOnlyImm).off_reth, 12);
  EXPECT_EQ(opcode_info(op::kRcWriteOnlyImm).off_imm, 28);
  EXPECT_EQ(opcode_info(op::kRcAtomicAck).off_aeth, 12);
  EXPECT_EQ(opcode_info(op::kRcAtomicAck).off_atomic_ack, 16);
  EXPECT_EQ(opcode_info(op::kUdSendOnlyImm).off_deth, 12);
  EXPECT_EQ(opcode_info(op::kUdSendOnlyImm).off_imm, 20);
}

TEST(Opcode, TransportFollowsTopBits) {
  for (int i : kDefined) {
    const auto &o = opcode_info(static_cast<uint8_t>(i));
    EXPECT_EQ(static_cast<int>(o.transport), i >> 5) << i;
  }
}

TEST(Opcode, UcMirrorsRcSendAndWrite) {
  for (uint8_t i = 0; i < 12; ++i) {
    EXPECT_EQ(opcode_info(i).mask, opcode_info(static_cast<uint8_t>(0x20 + i)).mask);
    EXPECT_EQ(opcode_info(i).hdr_len, opcode_info(static_cast<uint8_t>(0x20 + i)).hdr_len);
  }
  for (uint8_t i = 0x2C; i < 0x40; ++i)
    EXPECT_FALSE(opcode_info(i).valid()) << int(i);
}

TEST(Opcode, MessagePosition) {
  const auto only = kMaskFirst | kMaskLast;
  EXPECT_TRUE(opcode_info(op::kRcSendOnly).has(only));
  EXPECT_TRUE(opcode_info(op::kRcSendFirst).has(kMaskFirst));
  EXPECT_FALSE(opcode_info(op::kRcSendFirst).any(kMaskLast | kMaskMiddle));
  EXPECT_TRUE(opcode_info(op::kRcSendMiddle).has(kMaskMiddle));
  EXPECT_TRUE(opcode_info(op::kRcReadResponseLast).has(kMaskLast | kMaskAeth));
  EXPECT_FALSE(opcode_info(op::kRcReadResponseMiddle).any(kMaskAeth));
  EXPECT_TRUE(opcode_info(op::kRcWriteLastImm).has(kMaskRecvWqe | kMaskComp));
  EXPECT_FALSE(opcode_info(op::kRcWriteLast).any(kMaskRecvWqe | kMaskComp));
  EXPECT_FALSE(opcode_info(op::kRcAck).any(kMaskPayload));
  EXPECT_FALSE(opcode_info(op::kRcReadRequest).any(kMaskPayload));
}

TEST(Opcode, ValidForQpType) {
  EXPECT_TRUE(opcode_valid_for(Transport::kRc, op::kRcReadRequest));
  EXPECT_FALSE(opcode_valid_for(Transport::kUc, op::kRcReadRequest));
  EXPECT_FALSE(opcode_valid_for(Transport::kUd, op::kRcSendOnly));
  EXPECT_TRUE(opcode_valid_for(Transport::kUd, op::kUdSendOnly));
  EXPECT_TRUE(opcode_valid_for(Transport::kUc, op::kUcWriteOnlyImm));
  EXPECT_TRUE(opcode_valid_for(Transport::kRc, op::kCnp));
  EXPECT_FALSE(opcode_valid_for(Transport::kUd, op::kCnp));
  EXPECT_FALSE(opcode_valid_for(Transport::kRc, 0x15));
}

}  // namespace
}  // namespace uroce::wire
