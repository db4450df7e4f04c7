// SPDX-License-Identifier: BSD-3-Clause
// Waiting, bounded, for a neighbour resolution on the thread that runs ARP / ND itself.
//
// uroced's control handlers (modify_qp to RTR with an AV, create_ah) run on the main lcore,
// which also polls the ports and runs ARP / ND: a plain sleep would never see the answer. The
// wait keeps that loop running instead: between two resolve(now) calls it runs step() (one
// poll-loop iteration: it receives the answer and sends the retransmissions) and nap() when
// step() did no work. It ends at the first answer that is not kPending (kResolved, kFailed:
// the episode ended without a MAC, or failed less than NeighParams::retry_ns ago, kNoSource,
// kTableFull) or with kPending once bound_ns have passed (the resolution goes on).
#pragma once

#include <cstdint>

#include "port/neigh.h"

namespace uroce::port {

// now() -> uint64_t ns; resolve(uint64_t now) -> Resolve; step() -> unsigned work; nap().
template <class Now, class ResolveFn, class Step, class Nap>
Resolve wait_resolution(Now &&now, ResolveFn &&resolve, Step &&step, Nap &&nap,
                        uint64_t bound_ns) noexcept {
  const uint64_t start = now();
  for (;;) {
    const uint64_t t = now();
    const Resolve r = resolve(t);
    if (r != Resolve::kPending || t - start >= bound_ns) return r;
    if (step() == 0) nap();
  }
}

}  // namespace uroce::port
