// SPDX-License-Identifier: BSD-3-Clause
#include "config/config.h"

#include "config/cc_config.h"
#include "config/number.h"
#include "config/quota_config.h"

#include <arpa/inet.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace uroce::config {

namespace {

struct Entry {
  std::string section;  // "eal", "daemon", "port", "cc"
  std::string port;     // port name for section "port" (and "cc" of one port; empty: [cc])
  std::string key;
  std::string value;
  std::string where;  // "file:line" or "--set #N"
};

[[noreturn]] void fail(const std::string &where, const std::string &msg) {
  throw ConfigError(where + ": " + msg);
}

std::string section_label(const Entry &e) {
  if (e.section == "port") return "[port " + e.port + "]";
  if (e.section == "cc" && !e.port.empty()) return "[cc " + e.port + "]";
  return "[" + e.section + "]";
}

[[noreturn]] void fail_key(const Entry &e, const std::string &msg) {
  const std::string sect = section_label(e);
  fail(e.where, "key '" + e.key + "' in " + sect + ": " + msg);
}

std::string_view trim(std::string_view s) {
  const char *ws = " \t\r\n";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  const size_t e = s.find_last_not_of(ws);
  return s.substr(b, e - b + 1);
}

bool valid_port_name(std::string_view n) {
  if (n.empty() || n.size() > 32) return false;
  return std::all_of(n.begin(), n.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
  });
}

bool valid_key(std::string_view k) {
  if (k.empty()) return false;
  return std::all_of(k.begin(), k.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

// Keys each section accepts, and whether a key may appear more than once.
struct KeyInfo {
  const char *name;
  bool repeatable;
};
constexpr KeyInfo kEalKeys[] = {{"args", true}};
constexpr KeyInfo kDaemonKeys[] = {
    {"socket", false},           {"workers", false}, {"mbufs", false},
    {"rx_desc", false},          {"tx_desc", false}, {"pcap", false},
    {"idle_sleep_us", false},    {"poll", false},    {"idle_threshold_us", false},
    {"idle_max_sleep_us", false}};
constexpr KeyInfo kPortKeys[] = {{"device", false},       {"ipv4", true},     {"ipv6", true},
                                 {"mtu", false},          {"dscp", false},    {"ecn", false},
                                 {"ibdev", false},        {"gateway", false}, {"socket", false},
                                 {"neigh_wait_ms", false}};

const KeyInfo *find_key(std::string_view section, std::string_view key) {
  auto look = [&](auto &tbl) -> const KeyInfo * {
    for (const KeyInfo &k : tbl)
      if (key == k.name) return &k;
    return nullptr;
  };
  if (section == "eal") return look(kEalKeys);
  static constexpr KeyInfo kQuotaKey{"quota", false};
  if (section == "daemon" && detail::is_quota_key(key)) return &kQuotaKey;
  if (section == "daemon") return look(kDaemonKeys);
  if (section == "port") return look(kPortKeys);
  static constexpr KeyInfo kCcKey{"cc", false};
  if (section == "cc" && detail::is_cc_key(key)) return &kCcKey;
  return nullptr;
}

std::string known_keys(std::string_view section) {
  std::string out;
  auto add = [&](auto &tbl) {
    for (const KeyInfo &k : tbl) {
      if (!out.empty()) out += ", ";
      out += k.name;
    }
  };
  if (section == "eal") add(kEalKeys);
  if (section == "daemon") {
    add(kDaemonKeys);
    out += ", " + detail::quota_known_keys();
  }
  if (section == "port") add(kPortKeys);
  if (section == "cc") out = detail::cc_known_keys();
  return out;
}

template <class T>
T parse_uint(const Entry &e, uint64_t lo, uint64_t hi) {
  uint64_t x = 0;
  std::string why;
  if (!detail::parse_decimal(e.value, lo, hi, &x, &why)) fail_key(e, why);
  return static_cast<T>(x);
}

std::vector<unsigned> parse_lcore_list(const Entry &e) {
  std::vector<unsigned> out;
  std::set<unsigned> seen;
  std::string_view v = e.value;
  while (!v.empty()) {
    const size_t comma = v.find(',');
    std::string_view item = trim(v.substr(0, comma));
    v = comma == std::string_view::npos ? std::string_view{} : v.substr(comma + 1);
    auto num = [&](std::string_view s) {
      unsigned x = 0;
      auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), x, 10);
      if (s.empty() || ec != std::errc() || p != s.data() + s.size())
        fail_key(e, "bad number '" + std::string(s) + "' in lcore list '" + e.value + "'");
      if (x >= 128) fail_key(e, "lcore " + std::to_string(x) + " out of range [0, 127]");
      return x;
    };
    const size_t dash = item.find('-');
    unsigned a = 0, b = 0;
    if (dash == std::string_view::npos) {
      a = b = num(item);
    } else {
      a = num(trim(item.substr(0, dash)));
      b = num(trim(item.substr(dash + 1)));
      if (b < a) fail_key(e, "bad lcore range '" + std::string(item) + "'");
    }
    for (unsigned i = a; i <= b; ++i) {
      if (!seen.insert(i).second) fail_key(e, "lcore " + std::to_string(i) + " listed twice");
      out.push_back(i);
    }
  }
  if (out.empty()) fail_key(e, "empty lcore list");
  return out;
}

// Splits "addr/len"; fails naming the key if the prefix is missing or malformed.
std::pair<std::string, unsigned> split_prefix(const Entry &e, unsigned max_len) {
  const size_t slash = e.value.find('/');
  if (slash == std::string::npos)
    fail_key(e, "missing prefix length in '" + e.value + "' (expected ADDRESS/LEN)");
  const std::string len_s = e.value.substr(slash + 1);
  unsigned len = 0;
  auto [p, ec] = std::from_chars(len_s.data(), len_s.data() + len_s.size(), len, 10);
  if (len_s.empty() || ec != std::errc() || p != len_s.data() + len_s.size())
    fail_key(e, "bad prefix length '" + len_s + "'");
  if (len < 1 || len > max_len)
    fail_key(e, "prefix length " + len_s + " out of range [1, " + std::to_string(max_len) + "]");
  return {e.value.substr(0, slash), len};
}

Ipv4Prefix parse_ipv4_prefix(const Entry &e) {
  auto [addr, len] = split_prefix(e, 32);
  Ipv4Prefix p;
  if (!parse_ipv4(addr, p.addr)) fail_key(e, "bad IPv4 address '" + addr + "'");
  p.len = static_cast<uint8_t>(len);
  const uint32_t a = (uint32_t{p.addr[0]} << 24) | (uint32_t{p.addr[1]} << 16) |
                     (uint32_t{p.addr[2]} << 8) | p.addr[3];
  // 0/8 is "this network" (RFC 1122 3.2.1.3): none of it is a host's own address, not only 0.0.0.0.
  if (p.addr[0] == 0 || p.addr[0] == 127 || p.addr[0] >= 224)
    fail_key(e, "IPv4 address '" + addr +
                    "' is not a unicast host address (0/8 any, 127/8 loopback, 224/4 multicast "
                    "and 240/4 reserved are refused)");
  if (len <= 30) {
    const uint32_t host_mask = (len == 32) ? 0 : (0xFFFFFFFFu >> len);
    if ((a & host_mask) == host_mask)
      fail_key(e,
               "IPv4 address '" + addr + "' is the broadcast address of /" + std::to_string(len));
    if ((a & host_mask) == 0)
      fail_key(e, "IPv4 address '" + addr + "' is the network address of /" + std::to_string(len));
  }
  return p;
}

Ipv6Prefix parse_ipv6_prefix(const Entry &e) {
  auto [addr, len] = split_prefix(e, 128);
  Ipv6Prefix p;
  if (!parse_ipv6(addr, p.addr)) fail_key(e, "bad IPv6 address '" + addr + "'");
  p.len = static_cast<uint8_t>(len);
  static constexpr uint8_t kZero[16] = {};
  static constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};
  if (p.addr[0] == 0xFF) fail_key(e, "IPv6 address '" + addr + "' is multicast");
  if (std::equal(p.addr, p.addr + 15, kZero) && p.addr[15] <= 1)
    fail_key(e, "IPv6 address '" + addr + "' is unspecified or loopback");
  if (std::equal(p.addr, p.addr + 12, kMapped))
    fail_key(e, "IPv6 address '" + addr + "' is IPv4-mapped: configure it with 'ipv4' instead");
  return p;
}

// True if `s` has a control character (C0, DEL): a value from --set can hold a newline, a file
// value a CR / VT / FF in its middle.
bool has_control(std::string_view s) {
  return std::any_of(s.begin(), s.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u < 0x20 || u == 0x7F;
  });
}

// A Unix socket path: absolute, within sun_path (107 bytes and the NUL).
std::string parse_socket_path(const Entry &e) {
  if (e.value.empty() || e.value[0] != '/')
    fail_key(e, "bad value '" + e.value + "' (expected an absolute path)");
  if (e.value.size() > 107) fail_key(e, "path longer than 107 bytes (sun_path limit)");
  if (has_control(e.value)) fail_key(e, "path contains a control character");
  return e.value;
}

bool parse_bool(const Entry &e) {
  if (e.value == "on" || e.value == "yes" || e.value == "true" || e.value == "1") return true;
  if (e.value == "off" || e.value == "no" || e.value == "false" || e.value == "0") return false;
  fail_key(e, "bad value '" + e.value + "' (expected on or off)");
}

// Reads the file's lines into entries; checks syntax, sections, keys and duplicates.
void read_file_entries(std::string_view text, std::string_view filename,
                       std::vector<Entry> *entries, std::vector<Entry> *port_sections,
                       std::vector<Entry> *cc_sections) {
  std::string section;
  std::string port;
  std::map<std::string, std::string> port_where;    // port name -> where declared
  std::map<std::string, std::string> single_where;  // "sect/port/key" -> where first set
  size_t lineno = 0;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = trim(text.substr(pos, nl - pos));
    pos = nl + 1;
    ++lineno;
    const std::string where = std::string(filename) + ":" + std::to_string(lineno);
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line[0] == '[') {
      if (line.back() != ']') fail(where, "malformed section header '" + std::string(line) + "'");
      std::string_view inner = trim(line.substr(1, line.size() - 2));
      const size_t sp = inner.find_first_of(" \t");
      std::string_view kind = inner.substr(0, sp);
      std::string_view name = sp == std::string_view::npos ? "" : trim(inner.substr(sp));
      if (kind == "eal" || kind == "daemon") {
        if (!name.empty())
          fail(where, "section [" + std::string(kind) + "] takes no name (got '" +
                          std::string(name) + "')");
        section = kind;
        port.clear();
      } else if (kind == "port") {
        if (name.empty()) fail(where, "section [port] needs a name: [port NAME]");
        if (!valid_port_name(name))
          fail(where,
               "bad port name '" + std::string(name) + "' (1-32 characters of A-Z a-z 0-9 _ -)");
        auto [it, fresh] = port_where.emplace(std::string(name), where);
        if (!fresh)
          fail(where, "duplicate port name '" + std::string(name) + "' (first declared at " +
                          it->second + ")");
        section = "port";
        port = name;
        port_sections->push_back(Entry{section, port, "", "", where});
      } else if (kind == "cc") {  // [cc]: every port; [cc NAME]: port NAME, on top of [cc]
        if (!name.empty() && !valid_port_name(name))
          fail(where,
               "bad port name '" + std::string(name) + "' (1-32 characters of A-Z a-z 0-9 _ -)");
        section = "cc";
        port = name;
        cc_sections->push_back(Entry{section, port, "", "", where});
      } else {
        fail(where, "unknown section [" + std::string(inner) +
                        "] (known: [eal], [daemon], [port NAME], [cc], [cc PORT])");
      }
      continue;
    }
    const size_t eq = line.find('=');
    if (eq == std::string_view::npos)
      fail(where,
           "expected 'key = value', a [section] or a # comment, got '" + std::string(line) + "'");
    Entry e{section, port, std::string(trim(line.substr(0, eq))),
            std::string(trim(line.substr(eq + 1))), where};
    if (!valid_key(e.key)) fail(where, "bad key '" + e.key + "'");
    if (section.empty()) fail(where, "key '" + e.key + "' before any [section]");
    const KeyInfo *ki = find_key(section, e.key);
    if (ki == nullptr) fail_key(e, "unknown key (known keys: " + known_keys(section) + ")");
    if (!ki->repeatable) {
      auto [it, fresh] = single_where.emplace(section + "/" + port + "/" + e.key, where);
      if (!fresh) fail_key(e, "duplicate key (first set at " + it->second + ")");
    }
    entries->push_back(std::move(e));
  }
}

// Applies "section.key=value" overrides: they replace the file's values of that key.
void apply_overrides(const std::vector<std::string> &overrides, std::vector<Entry> *entries,
                     std::vector<Entry> *port_sections) {
  std::set<std::string> replaced;  // "sect/port/key" whose file values are dropped
  std::vector<Entry> added;
  for (size_t i = 0; i < overrides.size(); ++i) {
    const std::string where = "--set #" + std::to_string(i + 1) + " '" + overrides[i] + "'";
    const std::string &o = overrides[i];
    const size_t eq = o.find('=');
    if (eq == std::string::npos) fail(where, "expected section.key=value");
    const std::string lhs(trim(std::string_view(o).substr(0, eq)));
    const std::string value(trim(std::string_view(o).substr(eq + 1)));
    const size_t dot = lhs.rfind('.');
    if (dot == std::string::npos || dot == 0) fail(where, "expected section.key=value");
    std::string sect = lhs.substr(0, dot);
    const std::string key = lhs.substr(dot + 1);
    std::string port;
    if (sect.rfind("port.", 0) == 0) {
      port = sect.substr(5);
      sect = "port";
      if (!valid_port_name(port))
        fail(where, "bad port name '" + port + "' (1-32 characters of A-Z a-z 0-9 _ -)");
    } else if (sect == "port") {
      fail(where, "port keys are set as port.NAME.key=value");
    } else if (sect.rfind("cc.", 0) == 0) {
      port = sect.substr(3);
      sect = "cc";
      if (!valid_port_name(port))
        fail(where, "bad port name '" + port + "' (1-32 characters of A-Z a-z 0-9 _ -)");
    } else if (sect != "eal" && sect != "daemon" && sect != "cc") {
      fail(where, "unknown section '" + sect + "' (known: eal, daemon, port.NAME, cc, cc.PORT)");
    }
    Entry e{sect, port, key, value, where};
    const KeyInfo *ki = find_key(sect, key);
    if (ki == nullptr) fail_key(e, "unknown key (known keys: " + known_keys(sect) + ")");
    const std::string id = sect + "/" + port + "/" + key;
    replaced.insert(id);
    if (!ki->repeatable) {  // last --set wins
      std::erase_if(added, [&](const Entry &a) {
        return a.section == sect && a.port == port && a.key == key;
      });
    }
    if (sect == "port" && std::none_of(port_sections->begin(), port_sections->end(),
                                       [&](const Entry &p) { return p.port == port; }))
      port_sections->push_back(Entry{sect, port, "", "", where});
    added.push_back(std::move(e));
  }
  std::erase_if(*entries, [&](const Entry &e) {
    return replaced.count(e.section + "/" + e.port + "/" + e.key) != 0;
  });
  entries->insert(entries->end(), added.begin(), added.end());
}

}  // namespace

uint32_t ib_mtu_from_eth_mtu(uint32_t eth_mtu) {
  if (eth_mtu < kRxeMaxHdrLength) return 0;
  const uint32_t room = eth_mtu - kRxeMaxHdrLength;
  for (uint32_t m = 4096; m >= 256; m /= 2)
    if (room >= m) return m;
  return 0;
}

bool PortConfig::device_is_pci() const {
  // [DDDD:]BB:DD.F with hex digits.
  auto hex = [](std::string_view s, size_t n) {
    return s.size() == n && std::all_of(s.begin(), s.end(), [](char c) {
             return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
           });
  };
  std::string_view d = device;
  if (d.size() == 12) {
    if (!hex(d.substr(0, 4), 4) || d[4] != ':') return false;
    d = d.substr(5);
  }
  return d.size() == 7 && hex(d.substr(0, 2), 2) && d[2] == ':' && hex(d.substr(3, 2), 2) &&
         d[5] == '.' && d[6] >= '0' && d[6] <= '7';
}

uint32_t PortConfig::ib_mtu() const {
  return ib_mtu_from_eth_mtu(mtu);
}

Config parse(std::string_view text, std::string_view filename,
             const std::vector<std::string> &overrides) {
  std::vector<Entry> entries;
  std::vector<Entry> port_sections, cc_sections;
  read_file_entries(text, filename, &entries, &port_sections, &cc_sections);
  apply_overrides(overrides, &entries, &port_sections);

  Config cfg;
  for (const Entry &ps : port_sections) {
    PortConfig p;
    p.name = ps.port;
    p.where = ps.where;
    cfg.ports.push_back(std::move(p));
  }
  std::map<std::string, const Entry *> mtu_entry, device_entry, ibdev_entry, socket_entry;
  std::map<std::string, std::vector<detail::CcItem>> cc_items;  // port name ("": [cc]) -> items
  for (const Entry &e : entries) {
    if (e.section == "cc") {
      cc_items[e.port].push_back(detail::CcItem{e.key, e.value, e.where, section_label(e)});
    } else if (e.section == "eal") {  // args
      std::istringstream in(e.value);
      std::string tok;
      size_t n = 0;
      while (in >> tok) {
        cfg.eal_args.push_back(tok);
        ++n;
      }
      if (n == 0) fail_key(e, "empty value");
    } else if (e.section == "daemon") {
      DaemonConfig &d = cfg.daemon;
      if (e.key == "socket") {
        d.socket = parse_socket_path(e);
      } else if (e.key == "workers") {
        d.workers = parse_lcore_list(e);
      } else if (e.key == "mbufs") {
        d.mbufs = parse_uint<uint32_t>(e, 511, 16u << 20);
      } else if (e.key == "rx_desc") {
        d.rx_desc = parse_uint<uint16_t>(e, 32, 16384);
      } else if (e.key == "tx_desc") {
        d.tx_desc = parse_uint<uint16_t>(e, 32, 16384);
      } else if (e.key == "pcap") {
        if (has_control(e.value)) fail_key(e, "path contains a control character");
        d.pcap = e.value;  // empty: capture off
      } else if (e.key == "idle_sleep_us") {
        d.idle_sleep_us = parse_uint<uint32_t>(e, 0, 100000);
        // A nap shorter than a sleep/wake round trip keeps the daemon in the kernel: measured
        // on a 2-vCPU VM, 5 us naps took 95 % of a core while idle (10 us: 36 %, 20 us: 27 %).
        if (d.idle_sleep_us != 0 && d.idle_sleep_us < kMinIdleSleepUs)
          fail_key(e, "a nap of " + e.value +
                          " us costs more CPU than it saves: 0 (busy polling) or " +
                          std::to_string(kMinIdleSleepUs) + "..100000");
      } else if (detail::is_quota_key(e.key)) {
        detail::apply_quota_key(e.key, e.value, e.where, &d.quota);
      } else if (e.key == "poll") {
        if (e.value == "adaptive")
          d.poll = PollMode::kAdaptive;
        else if (e.value == "busy")
          d.poll = PollMode::kBusy;
        else
          fail_key(e, "bad value '" + e.value + "' (expected adaptive or busy)");
      } else if (e.key == "idle_threshold_us") {
        d.idle_threshold_us = parse_uint<uint32_t>(e, 0, 1000000);
      } else if (e.key == "idle_max_sleep_us") {
        d.idle_max_sleep_us = parse_uint<uint32_t>(e, kMinIdleSleepUs, 1000000);
      }
    } else {
      auto it = std::find_if(cfg.ports.begin(), cfg.ports.end(),
                             [&](const PortConfig &p) { return p.name == e.port; });
      PortConfig &p = *it;  // every port entry has its section (file or --set)
      if (e.key == "device") {
        if (e.value.empty()) fail_key(e, "empty value (expected a PCI address or vdev string)");
        if (e.value.find(' ') != std::string::npos || has_control(e.value))
          fail_key(e, "device '" + e.value + "' contains white space or a control character");
        p.device = e.value;
        device_entry[p.name] = &e;
      } else if (e.key == "ipv4") {
        p.ipv4.push_back(parse_ipv4_prefix(e));
      } else if (e.key == "ipv6") {
        p.ipv6.push_back(parse_ipv6_prefix(e));
      } else if (e.key == "mtu") {
        p.mtu = parse_uint<uint32_t>(e, kMinMtu, kMaxMtu);
        mtu_entry[p.name] = &e;
      } else if (e.key == "dscp") {
        p.dscp = parse_uint<uint8_t>(e, 0, 63);
      } else if (e.key == "ecn") {
        p.ecn = parse_bool(e);
      } else if (e.key == "neigh_wait_ms") {
        p.neigh_wait_ms = parse_uint<uint32_t>(e, 0, 10000);
      } else if (e.key == "ibdev") {
        // The verbs device name apps see (ibv_get_device_name, ibv_devinfo -d): IBV_SYSFS_NAME_MAX
        // is 64 bytes with the NUL.
        if (e.value.empty() || e.value.size() > 63 ||
            e.value.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                      "0123456789_-") != std::string::npos)
          fail_key(e, "bad device name '" + e.value + "' (1-63 characters of A-Z a-z 0-9 _ -)");
        p.ibdev = e.value;
        ibdev_entry[p.name] = &e;
      } else if (e.key == "socket") {
        p.socket = parse_socket_path(e);
        socket_entry[p.name] = &e;
      } else if (e.key == "gateway") {
        fail_key(e,
                 "routing through a gateway is not supported: uroced reaches peers on the same "
                 "L2 segment only (doc/config.md)");
      }
    }
  }

  // Congestion control: [cc] for every port, then each port's [cc NAME] on top.
  detail::apply_cc_items(cc_items[""], &cfg.cc);
  for (PortConfig &pm : cfg.ports) {
    pm.cc = cfg.cc;
    detail::apply_cc_items(cc_items[pm.name], &pm.cc);
  }
  auto has_port = [&](const std::string &n) {
    return std::any_of(cfg.ports.begin(), cfg.ports.end(),
                       [&](const PortConfig &p) { return p.name == n; });
  };
  for (const Entry &cs : cc_sections)
    if (!cs.port.empty() && !has_port(cs.port))
      fail(cs.where, "section [cc " + cs.port + "] names no port (no [port " + cs.port + "])");
  for (const Entry &e : entries)
    if (e.section == "cc" && !e.port.empty() && !has_port(e.port))
      fail_key(e, "no port named '" + e.port + "'");

  // Whole-config checks.
  std::map<std::string, std::string> addr_owner;  // address text -> where
  std::map<std::string, std::string> dev_owner, ibdev_owner;
  for (size_t i = 0; i < cfg.ports.size(); ++i) {
    PortConfig &pm = cfg.ports[i];
    if (pm.ibdev.empty()) pm.ibdev = "uroce" + std::to_string(i);
    if (pm.socket.empty())
      pm.socket = i == 0 ? cfg.daemon.socket : cfg.daemon.socket + "." + pm.ibdev;
  }
  // One control socket per port (device), none shared.
  std::map<std::string, std::string> socket_owner;
  for (const PortConfig &p : cfg.ports) {
    const Entry *se = socket_entry[p.name];
    const std::string where = se ? se->where : p.where;
    if (p.socket.size() > 107)
      fail(where, "control socket of [port " + p.name + "] '" + p.socket +
                      "' is longer than 107 bytes (sun_path limit; set its 'socket' key)");
    auto [sit, sfresh] = socket_owner.emplace(p.socket, p.name);
    if (!sfresh)
      fail(where, "control socket '" + p.socket + "' of [port " + p.name +
                      "] is already the socket of port '" + sit->second + "'");
  }
  for (const PortConfig &p : cfg.ports) {
    auto [iit, ifresh] = ibdev_owner.emplace(p.ibdev, p.where);
    if (!ifresh) {
      const Entry *ie = ibdev_entry[p.name];
      fail(ie ? ie->where : p.where, "key 'ibdev' in [port " + p.name + "]: device name '" +
                                         p.ibdev + "' already used by another port");
    }
    if (p.device.empty())
      fail(p.where, "port '" + p.name + "' has no 'device' key (a PCI address or vdev string)");
    const Entry &de = *device_entry[p.name];
    auto [dit, dfresh] = dev_owner.emplace(p.device, de.where);
    if (!dfresh)
      fail_key(de,
               "device '" + p.device + "' already used by another port (at " + dit->second + ")");
    if (!p.ipv6.empty() && p.mtu < kIpv6MinMtu) {
      const Entry *me = mtu_entry[p.name];
      fail(me ? me->where : p.where,
           "key 'mtu' in [port " + p.name + "]: mtu " + std::to_string(p.mtu) + " is below " +
               std::to_string(kIpv6MinMtu) + ", the IPv6 minimum, and the port has IPv6 addresses");
    }
  }
  // Duplicate addresses, anywhere.
  for (const Entry &e : entries) {
    if (e.section != "port" || (e.key != "ipv4" && e.key != "ipv6")) continue;
    std::string a = e.value.substr(0, e.value.find('/'));
    uint8_t raw[16];
    if (e.key == "ipv6" && parse_ipv6(a, raw)) a = format_ipv6(raw);
    auto [it, fresh] = addr_owner.emplace(a, e.where);
    if (!fresh) fail_key(e, "address " + a + " configured twice (first at " + it->second + ")");
  }
  return cfg;
}

Config load_file(const std::string &path, const std::vector<std::string> &overrides) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(path + ": cannot open config file");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw ConfigError(path + ": read error");
  return parse(ss.str(), path, overrides);
}

}  // namespace uroce::config
