// SPDX-License-Identifier: BSD-3-Clause
// Seed inputs for the fuzz targets, made with lib/wire's builder at build / test time (no binary
// blobs in the repository). fuzz_seed_gen writes them out as a libFuzzer corpus directory.
#pragma once

#include <cstdint>
#include <vector>

namespace uroce::fuzz {

using Seed = std::vector<uint8_t>;

// parse_frame_fuzz: a mode byte, then a frame (every valid opcode, IPv4 / IPv6, untagged /
// 802.1Q, with and without payload; plus damaged and non-RoCE variants).
std::vector<Seed> parse_frame_seeds();

// build_parse_fuzz: encoded BuildInputs (every opcode byte, both families, every capacity mode,
// payload lengths up to 9000).
std::vector<Seed> build_parse_seeds();

// engine_rx_fuzz: records of engine_rx_fuzz.h with frames for every opcode, multi-packet
// messages, responses / NAKs to the requests in flight and clock steps (engine_seeds.cc).
std::vector<Seed> engine_rx_seeds();

}  // namespace uroce::fuzz
