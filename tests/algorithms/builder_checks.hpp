#pragma once
// Helpers shared by the builder tests: cached topologies, building a plan
// with a few options, verifying it with a readable failure, counting ops.

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "artune/algorithms/builders.hpp"
#include "artune/algorithms/plan.hpp"
#include "artune/algorithms/verifier/verifier.hpp"
#include "artune/core/error.hpp"
#include "artune/topology/io/io.hpp"

namespace artune::test {

/// A topology loaded once per test binary.
inline const Topology& topo(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Topology>> cache;
  auto& slot = cache[name];
  if (!slot) slot = std::make_unique<Topology>(load_topology(name));
  return *slot;
}

/// Options for `count` elements with an op, optional gpu permutation and pipeline depth.
inline BuildOptions opts(std::int64_t count, ReduceOp op = ReduceOp::kSum, std::vector<int> perm = {},
                         int segments = 1) {
  BuildOptions o;
  o.count = count;
  o.reduce_op = op;
  o.gpu_perm = std::move(perm);
  o.segments = segments;
  return o;
}

/// The verifier's problems, one per line (for failure messages).
inline std::string problems(const VerifyResult& r) {
  std::string out;
  for (const auto& p : r.problems) out += p + "\n";
  return out;
}

/// Builds and checks the plan passes the verifier.
inline Plan build_verified(const std::string& topology, const std::string& spec, const BuildOptions& o) {
  const Plan plan = build_plan(topo(topology), spec, o);
  const VerifyResult r = verify(plan);
  INFO(topology, " ", spec, " count=", o.count, "\n", problems(r));
  CHECK(r.ok);
  return plan;
}

/// Ops of one kind.
inline std::vector<Op> ops_of(const Plan& plan, OpKind kind) {
  std::vector<Op> out;
  for (const Op& op : plan.ops) {
    if (op.kind == kind) out.push_back(op);
  }
  return out;
}

/// Number of ops of one kind.
inline int count_of(const Plan& plan, OpKind kind) { return static_cast<int>(ops_of(plan, kind).size()); }

/// True when the message of the InvalidInput thrown by `f` contains every fragment.
template <class F>
bool throws_mentioning(F&& f, std::initializer_list<std::string> fragments) {
  try {
    f();
  } catch (const InvalidInput& e) {
    const std::string what = e.what();
    for (const auto& frag : fragments) {
      if (what.find(frag) == std::string::npos) {
        MESSAGE("message '", what, "' lacks '", frag, "'");
        return false;
      }
    }
    return true;
  }
  return false;
}

}  // namespace artune::test
