#include "target/capabilities.h"

#include <iterator>

#include "common/error.h"

namespace qd {

namespace {

#define QD_CAP_NAME(x) #x,
#define QD_CAP_NAME_SPACED(x) #x "_buffer", #x "_shared",
constexpr const char *kNames[] = {QD_CAPS(QD_CAP_NAME, QD_CAP_NAME_SPACED)};
#undef QD_CAP_NAME
#undef QD_CAP_NAME_SPACED
static_assert(std::size(kNames) == kNumCaps);

constexpr std::string_view kSharedLimit = "max_shared_memory_bytes=";
constexpr std::string_view kSubgroupSize = "subgroup_size=";
constexpr const char *kNoSubgroupAggregation = "no_subgroup_aggregation";
constexpr const char *kNoConstantFolding = "no_constant_folding";
constexpr const char *kNoInterleave = "no_interleave_iterations";

[[noreturn]] void unknown(const std::string &what) {
  std::string known;
  for (const char *n : kNames) known += (known.empty() ? "" : ", ") + std::string(n);
  throw RuntimeError(what + " (the boolean device caps are: " + known + ")");
}

// The number after `prefix` in `name` ("sm_90" -> 90), if that is all there is.
std::optional<int64_t> number_after(std::string_view prefix, const std::string &name) {
  if (name.rfind(prefix, 0) != 0 || name.size() == prefix.size()) return std::nullopt;
  int64_t n = 0;
  for (char c : name.substr(prefix.size())) {
    if (c < '0' || c > '9' || n > (int64_t(1) << 40)) return std::nullopt;
    n = n * 10 + (c - '0');
  }
  return n;
}

}  // namespace

const char *cap_name(Cap c) { return kNames[static_cast<size_t>(c)]; }

std::optional<Cap> cap_from_name(std::string_view name) {
  for (size_t i = 0; i < kNumCaps; i++)
    if (name == kNames[i]) return static_cast<Cap>(i);
  return std::nullopt;
}

TargetFeatures features_from_names(const std::vector<std::string> &names) {
  TargetFeatures f;
  for (const std::string &name : names) {
    if (auto sm = number_after("sm_", name)) f.cuda_sm = static_cast<int>(*sm);
    else if (name.rfind("gfx", 0) == 0) f.amdgpu_gfx = name;
    else if (auto bytes = number_after(kSharedLimit, name)) f.max_shared_memory_bytes = *bytes;
    else if (auto lanes = number_after(kSubgroupSize, name)) f.subgroup_size = static_cast<int>(*lanes);
    else if (name == kNoSubgroupAggregation) f.subgroup_aggregation = false;
    else if (name == kNoConstantFolding) f.constant_folding = false;
    else if (name == kNoInterleave) f.interleave_iterations = false;
    else if (auto c = cap_from_name(name)) f.caps.set(*c);
    else unknown("unknown feature '" + name + "': not sm_NN, gfxNNN, max_shared_memory_bytes=N, subgroup_size=N, " +
                 kNoSubgroupAggregation + ", " + kNoConstantFolding + ", " + kNoInterleave + " nor a boolean device cap");
  }
  return f;
}

std::vector<std::string> feature_names(const TargetFeatures &f) {
  std::vector<std::string> out;
  for (size_t i = 0; i < kNumCaps; i++)
    if (f.caps.bits.test(i)) out.push_back(kNames[i]);
  if (f.cuda_sm) out.push_back("sm_" + std::to_string(f.cuda_sm));
  if (!f.amdgpu_gfx.empty()) out.push_back(f.amdgpu_gfx);
  if (f.max_shared_memory_bytes) out.push_back(std::string(kSharedLimit) + std::to_string(f.max_shared_memory_bytes));
  if (f.subgroup_size) out.push_back(std::string(kSubgroupSize) + std::to_string(f.subgroup_size));
  if (!f.subgroup_aggregation) out.push_back(kNoSubgroupAggregation);
  if (!f.constant_folding) out.push_back(kNoConstantFolding);
  if (!f.interleave_iterations) out.push_back(kNoInterleave);
  return out;
}

CapSet caps_from_names(const std::vector<std::string> &names) {
  CapSet s;
  for (const std::string &name : names) {
    auto c = cap_from_name(name);
    if (!c) unknown("cannot disable '" + name + "': not a boolean device cap");
    s.set(*c);
  }
  return s;
}

}  // namespace qd
