// SPDX-License-Identifier: BSD-3-Clause
// Memory windows (IBTA 10.6.7, types 1 and 2B as Linux rxe): a window gives remote access to
// part of an MR under its own rkey, bound and invalidated by work requests.
//
// Keys: a window's rkey is (id << 8) | tag. The 24-bit id is drawn at alloc (random, nonzero,
// its low bits naming the slot, differing from the slot's previous id); the 8-bit tag is the
// consumer's part, replaced by every bind (ibv_inc_rkey for type 1, the WR's rkey for type 2).
// MR keys and window keys never coincide: alloc avoids every id that is the high 24 bits of a
// live MR key, and ObjectTables::reg_mr redraws an MR key whose high 24 bits are a live
// window's id, so the responder tries the MR table, then this one.
//
// Threads: alloc / dealloc on the control thread; bind / invalidate on the worker that runs
// the QP; check on any worker. A slot is a seqlock: a writer takes `seq` from even to odd,
// writes, and makes it even again; a reader copies the fields and retries (bounded) if `seq`
// moved. Readers keep nothing of a window but the copy: the memory it reaches is the MR's,
// re-checked in the MR table (grace periods as for MRs), so a slot needs no grace period.
#pragma once

#include <cstdint>
#include <memory>

#include "transport/mr.h"
#include "util/csprng.h"

namespace uroce::transport {

enum class MwType : uint8_t { kType1 = 1, kType2 = 2 };  // ibv_mw_type

// A bind WR's arguments (ibv_send_wr.bind_mw).
struct MwBind {
  uint32_t mw_rkey = 0;   // the window's current rkey
  uint32_t new_rkey = 0;  // its low 8 bits become the window's tag
  uint32_t mr_key = 0;    // the MR bound to (ignored when length is 0: type 1 unbind)
  uint64_t va = 0;
  uint64_t length = 0;
  uint32_t access = 0;  // remote read / write / atomic
};

struct MemoryWindow {
  enum class State : uint8_t { kUnused = 0, kFree, kValid };  // kFree: type 2, not bound
  uint32_t seq = 0;                                           // seqlock, even when stable
  uint32_t id = 0;
  uint32_t key = 0;
  uint32_t pd = 0;
  uint32_t qpn = 0;  // type 2: the QP it is bound to
  uint32_t mr_key = 0;
  uint32_t access = 0;
  MwType type = MwType::kType1;
  State state = State::kUnused;
  uint64_t va = 0;
  uint64_t length = 0;
};

class MwTable {
 public:
  // seed 0: ids from a getrandom(2)-keyed CSPRNG; else reproducible (tests).
  MwTable(uint32_t capacity, uint64_t seed);

  // Control thread. A type 1 window starts valid with length 0, a type 2 free (rxe). 0 or
  // ENOMEM (table full); the rkey is written to *rkey.
  int alloc(uint32_t pd, MwType type, const MrTable &mrs, uint32_t *rkey) noexcept;
  // The same with the id and the first tag chosen by the caller (rkey = id << 8 | tag):
  // 0, EINVAL (id 0 or above 24 bits), EBUSY (its slot is taken, or an MR key has that id)
  // or ENOMEM.
  int alloc_with_id(uint32_t id, uint8_t tag, uint32_t pd, MwType type, const MrTable &mrs,
                    uint32_t *rkey) noexcept;
  // The window (whatever it is bound to) stops existing. 0 or EINVAL; *pd_out its PD.
  int dealloc(uint32_t rkey, uint32_t *pd_out) noexcept;
  // Whether a live window has id `id` (the high 24 bits of a key).
  bool id_live(uint32_t id) const noexcept;

  // The QP's worker (BIND_MW, IBTA 10.6.7.2 / rxe_check_bind_mw): 0, or EINVAL for every
  // violation (the WC is IBV_WC_MW_BIND_ERR): unknown rkey, PD other than the QP's, type 1 not
  // valid or type 2 not free, type 2 with length 0 or an unchanged tag, access flags other
  // than local write and remote read / write / atomic, an MR of another PD, without MW_BIND, not
  // covering [va, va + length), or without local write for remote write / atomic.
  int bind(const MwBind &b, uint32_t qp_pd, uint32_t qpn, const MrTable &mrs) noexcept;
  // LOCAL_INV (remote false) or SEND_WITH_INV (remote true): a bound type 2 window of PD `pd`
  // becomes free; remotely only through the QP it is bound to. 0 or EINVAL (type 1 included).
  int invalidate(uint32_t rkey, uint32_t pd, uint32_t qpn, bool remote) noexcept;

  // The responder's check of an rkey naming a window, through QP `qpn` of PD `pd`: bound,
  // same PD, type 2 bound to that QP, the access, [va, va + len) inside the window, and then
  // the MR it is bound to (which may have gone). On kOk *host is the byte for va.
  MrCheck check(uint32_t rkey, uint32_t pd, uint32_t qpn, uint64_t va, uint64_t len, uint32_t need,
                const MrTable &mrs, uint8_t **host) const noexcept;

  // A consistent copy of the window of `rkey` (false: no such slot content, or writers kept
  // it busy). For tests and check().
  bool snapshot(uint32_t rkey, MemoryWindow *out) const noexcept;
  uint32_t in_use() const noexcept { return in_use_; }
  uint32_t capacity() const noexcept { return cap_; }

 private:
  MemoryWindow &slot(uint32_t key) const noexcept { return mw_[(key >> 8) & mask_]; }
  static bool try_lock(MemoryWindow &w) noexcept;
  static void lock(MemoryWindow &w) noexcept;
  static void unlock(MemoryWindow &w) noexcept;

  uint32_t cap_;
  uint32_t mask_;
  uint32_t in_use_ = 0;
  util::Csprng rng_;
  std::unique_ptr<MemoryWindow[]> mw_;
};

}  // namespace uroce::transport
