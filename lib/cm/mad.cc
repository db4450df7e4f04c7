// SPDX-License-Identifier: BSD-3-Clause
#include "cm/mad.h"

#include "cm/bits.h"

namespace uroce::cm {

namespace {
// IBTA 13.4.2, the common MAD header.
constexpr Field kBaseVer{0, 0, 8}, kClass{1, 0, 8}, kClassVer{2, 0, 8}, kMethod{3, 0, 8},
    kStatus{4, 0, 16}, kClassSpecific{6, 0, 16}, kTid{8, 0, 64}, kAttrId{16, 0, 16},
    kReserved{18, 0, 16}, kAttrMod{20, 0, 32};
}  // namespace

const char *attr_name(uint16_t attr) noexcept {
  switch (static_cast<AttrId>(attr)) {
    case AttrId::kClassPortInfo:
      return "ClassPortInfo";
    case AttrId::kReq:
      return "REQ";
    case AttrId::kMra:
      return "MRA";
    case AttrId::kRej:
      return "REJ";
    case AttrId::kRep:
      return "REP";
    case AttrId::kRtu:
      return "RTU";
    case AttrId::kDreq:
      return "DREQ";
    case AttrId::kDrep:
      return "DREP";
    case AttrId::kSidrReq:
      return "SIDR_REQ";
    case AttrId::kSidrRep:
      return "SIDR_REP";
    case AttrId::kLap:
      return "LAP";
    case AttrId::kApr:
      return "APR";
  }
  return "?";
}

void write_header(const MadHeader &h, uint8_t *mad) noexcept {
  set(mad, kBaseVer, h.base_version);
  set(mad, kClass, h.mgmt_class);
  set(mad, kClassVer, h.class_version);
  set(mad, kMethod, h.method);
  set(mad, kStatus, h.status);
  set(mad, kClassSpecific, h.class_specific);
  set(mad, kTid, h.tid);
  set(mad, kAttrId, h.attr_id);
  set(mad, kReserved, 0);
  set(mad, kAttrMod, h.attr_mod);
}

MadHeader read_header(const uint8_t *mad) noexcept {
  MadHeader h;
  h.base_version = static_cast<uint8_t>(get(mad, kBaseVer));
  h.mgmt_class = static_cast<uint8_t>(get(mad, kClass));
  h.class_version = static_cast<uint8_t>(get(mad, kClassVer));
  h.method = static_cast<uint8_t>(get(mad, kMethod));
  h.status = static_cast<uint16_t>(get(mad, kStatus));
  h.class_specific = static_cast<uint16_t>(get(mad, kClassSpecific));
  h.tid = get(mad, kTid);
  h.attr_id = static_cast<uint16_t>(get(mad, kAttrId));
  h.attr_mod = static_cast<uint32_t>(get(mad, kAttrMod));
  return h;
}

}  // namespace uroce::cm
