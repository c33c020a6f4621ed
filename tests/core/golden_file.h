// Reading the golden files of tests/data (one case per line: kind, then key=value fields; map= the 128 bytes in hex),
// shared by the tests that pin the encoders and the decoder to real encoders' bytes.
#pragma once

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tmaguard/tensormap.h"

namespace golden {

using namespace tmaguard;

struct Case {
  std::string kind;
  std::map<std::string, std::string> f;
  std::string line;
};

inline std::vector<uint64_t> nums(const std::string& s) {
  std::vector<uint64_t> v;
  if (s == "-") return v;
  std::stringstream ss(s);
  std::string x;
  while (std::getline(ss, x, ',')) v.push_back(static_cast<uint64_t>(std::stoll(x)));
  return v;
}

inline std::vector<Case> load(const std::string& path) {
  std::ifstream in(path);
  std::vector<Case> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::stringstream ss(line);
    Case c;
    c.line = line;
    ss >> c.kind;
    std::string kv;
    while (ss >> kv) {
      const auto eq = kv.find('=');
      c.f[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    out.push_back(std::move(c));
  }
  return out;
}

inline EncodeArgs args_of(const Case& c) {
  EncodeArgs a;
  a.kind = c.kind == "tiled" ? MapKind::kTiled : c.kind == "im2col" ? MapKind::kIm2col : MapKind::kIm2colWide;
  a.dtype = static_cast<uint32_t>(std::stoul(c.f.at("dtype")));
  a.rank = static_cast<uint32_t>(std::stoul(c.f.at("rank")));
  a.address = std::stoull(c.f.at("addr"), nullptr, 16);
  auto put = [](auto& dst, const std::vector<uint64_t>& v) {
    for (std::size_t i = 0; i < v.size() && i < dst.size(); ++i)
      dst[i] = static_cast<typename std::decay_t<decltype(dst)>::value_type>(v[i]);
  };
  put(a.dims, nums(c.f.at("dims")));
  put(a.strides, nums(c.f.at("strides")));
  put(a.element_strides, nums(c.f.at("es")));
  if (a.kind == MapKind::kTiled) put(a.box, nums(c.f.at("box")));
  if (a.kind == MapKind::kIm2col) {
    const auto lo = nums(c.f.at("lower")), up = nums(c.f.at("upper"));
    for (std::size_t i = 0; i < lo.size(); ++i) a.lower_corner[i] = static_cast<int32_t>(lo[i]);
    for (std::size_t i = 0; i < up.size(); ++i) a.upper_corner[i] = static_cast<int32_t>(up[i]);
  }
  if (a.kind == MapKind::kIm2colWide) {
    a.lower_corner[0] = std::stoi(c.f.at("lowerw"));
    a.upper_corner[0] = std::stoi(c.f.at("upperw"));
    a.wide_mode = static_cast<uint32_t>(std::stoul(c.f.at("mode")));
  }
  if (a.kind != MapKind::kTiled) {
    a.channels_per_pixel = static_cast<uint32_t>(std::stoul(c.f.at("cpp")));
    a.pixels_per_column = static_cast<uint32_t>(std::stoul(c.f.at("ppc")));
  }
  a.interleave = static_cast<uint32_t>(std::stoul(c.f.at("il")));
  a.swizzle = static_cast<uint32_t>(std::stoul(c.f.at("sw")));
  a.l2_promotion = static_cast<uint32_t>(std::stoul(c.f.at("l2")));
  a.oob_fill = static_cast<uint32_t>(std::stoul(c.f.at("oob")));
  return a;
}

inline std::vector<uint8_t> bytes_of(const std::string& hex) {
  std::vector<uint8_t> b;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
    b.push_back(static_cast<uint8_t>(std::stoul(hex.substr(i, 2), nullptr, 16)));
  return b;
}

}  // namespace golden
