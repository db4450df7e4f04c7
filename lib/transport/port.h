// SPDX-License-Identifier: BSD-3-Clause
// The packet interface between the transport engine and whatever carries its frames.
//
// The engine is a template over its port (eRPC style: no virtual call per packet). In the daemon
// the port hands out rte_mbuf data rooms and bursts them to an ethdev queue; in tests a fake
// link copies frames into a simulated network with a fake clock and seeded faults.
//
// Transmit: the engine asks for a buffer, writes a whole frame into it (lib/wire builder), then
// either commits it with its length or aborts it. A port with no free buffer returns a TxBuf with
// data == nullptr: the engine must treat that as back-pressure (retry on a later poll), never as
// an error. Receive: the owner of the port calls Engine::rx(frame, len) with frames it received;
// the engine does not keep the pointer after rx returns.
#pragma once

#include <concepts>
#include <cstdint>

namespace uroce::transport {

struct TxBuf {
  uint8_t *data = nullptr;  // nullptr: no buffer available now
  uint32_t cap = 0;         // bytes writable at data
  void *handle = nullptr;   // port-private (e.g. the rte_mbuf)
};

template <class P>
concept TxPort = requires(P &p, TxBuf b, uint32_t len) {
  { p.tx_alloc() }
  noexcept->std::same_as<TxBuf>;
  { p.tx_commit(b, len) }
  noexcept->std::same_as<void>;
  { p.tx_abort(b) }
  noexcept->std::same_as<void>;
};

// A monotonic nanosecond clock: the TSC in the daemon, a FakeClock in tests.
template <class C>
concept Clock = requires(const C &c) {
  { c.now_ns() }
  noexcept->std::same_as<uint64_t>;
};

}  // namespace uroce::transport
