#include <doctest/doctest.h>

#include <algorithm>
#include <string>

#include "artune/algorithms/spec.hpp"
#include "artune/core/error.hpp"

using namespace artune;

namespace {

std::string parse_error(const std::string& text) {
  try {
    parse_spec(text);
  } catch (const InvalidInput& e) {
    return e.what();
  }
  return "";
}

AlgToken tok(const std::string& name, int arg = -1) { return AlgToken{name, arg, ""}; }

}  // namespace

TEST_CASE("spec.tf_examples") {
  // The examples of tf_cnn_benchmarks' parse_all_reduce_spec docstring.
  {
    const AllReduceSpec s = parse_spec("xring");
    REQUIRE(s.ranges.size() == 1);
    CHECK(s.ranges[0].intra == tok("xring"));
    CHECK_FALSE(s.ranges[0].inter.has_value());
    CHECK(s.ranges[0].limit == -1);
  }
  CHECK(parse_spec("xring#2").ranges[0].intra == tok("xring", 2));
  CHECK(parse_spec("nccl").ranges[0].intra == tok("nccl"));
  {
    const AllReduceSpec s = parse_spec("nccl/xring");
    CHECK(s.ranges[0].intra == tok("nccl"));
    CHECK(s.ranges[0].inter == tok("xring"));
  }
  CHECK(parse_spec("pscpu").ranges[0].intra == tok("pscpu"));
  CHECK(parse_spec("psgpu#4").ranges[0].intra == tok("psgpu", 4));
  {
    const AllReduceSpec s = parse_spec("pscpu:2k:pscpu#2:64k:xring");
    REQUIRE(s.ranges.size() == 3);
    CHECK(s.ranges[0] == SpecRange{tok("pscpu"), std::nullopt, 2048});
    CHECK(s.ranges[1] == SpecRange{tok("pscpu", 2), std::nullopt, 65536});
    CHECK(s.ranges[2] == SpecRange{tok("xring"), std::nullopt, -1});
    CHECK(&s.pick(1) == &s.ranges[0]);
    CHECK(&s.pick(2048) == &s.ranges[0]);
    CHECK(&s.pick(2049) == &s.ranges[1]);
    CHECK(&s.pick(65536) == &s.ranges[1]);
    CHECK(&s.pick(65537) == &s.ranges[2]);
    CHECK(&s.pick(std::int64_t{1} << 40) == &s.ranges[2]);
  }
  {
    const AllReduceSpec s = parse_spec("pscpu/pscpu#2");
    CHECK(s.ranges[0].intra == tok("pscpu"));
    CHECK(s.ranges[0].inter == tok("pscpu", 2));
  }
  CHECK(parse_spec("nccl/rechd").ranges[0].inter == tok("rechd"));
  CHECK(parse_spec("nccl/pscpu").ranges[0].inter == tok("pscpu"));
  CHECK(parse_spec("pscpu/xring").ranges[0].inter == tok("xring"));
}

TEST_CASE("spec.names_and_limits") {
  CHECK(parse_spec("ring#3").ranges[0].intra == tok("xring", 3));
  CHECK(parse_spec("nccl/ring").ranges[0].inter == tok("xring"));
  for (const char* name : {"xring", "rechd", "pscpu", "psgpu", "shuffle", "hiercopy", "nccl", "mring", "tree", "2d"}) {
    CHECK(parse_spec(name).ranges[0].intra == tok(name));
  }
  CHECK(parse_spec("hiercopy#4").ranges[0].intra == tok("hiercopy", 4));
  CHECK(parse_spec("mring#2").ranges[0].intra == tok("mring", 2));
  CHECK(parse_spec("shuffle#3").ranges[0].intra == tok("shuffle", 3));
  // Suffixes are powers of 1024 (as tf_cnn_benchmarks' parse_general_int and artune's sizes).
  CHECK(parse_spec("nccl:100:xring").ranges[0].limit == 100);
  CHECK(parse_spec("nccl:3K:xring").ranges[0].limit == 3 * 1024);
  CHECK(parse_spec("nccl:3k:xring").ranges[0].limit == 3 * 1024);
  CHECK(parse_spec("nccl:2M:xring").ranges[0].limit == 2 * 1024 * 1024);
  CHECK(parse_spec("nccl:1G:xring").ranges[0].limit == std::int64_t{1} << 30);
  CHECK(parse_spec("nccl:1T:xring").ranges[0].limit == std::int64_t{1} << 40);
  const auto algs = spec_algorithms();
  CHECK(algs.size() == 21);
  CHECK(algs.front().first == "xring");
  CHECK(std::find_if(algs.begin(), algs.end(), [](const auto& a) { return a.first == "nccl/xring"; }) != algs.end());
}

TEST_CASE("spec.round_trip") {
  for (const char* text :
       {"xring", "xring#2", "nccl/xring", "pscpu/pscpu#2", "pscpu:2K:pscpu#2:64K:xring",
        "nccl:1000:xring#4:3M:hiercopy#2:5G:2d", "tree", "mring#3", "pscpu#2/rechd", "nccl/shuffle#2", "psgpu#1"}) {
    CAPTURE(text);
    const AllReduceSpec s = parse_spec(text);
    CHECK(to_string(s) == text);
    CHECK(parse_spec(to_string(s)) == s);
  }
  // Canonical forms.
  CHECK(to_string(parse_spec("ring")) == "xring");
  CHECK(to_string(parse_spec("nccl:2k:ring#2")) == "nccl:2K:xring#2");
  CHECK(to_string(parse_spec("nccl:2048:xring")) == "nccl:2K:xring");
  CHECK(to_string(parse_spec("nccl:1048576:xring")) == "nccl:1M:xring");
  CHECK(to_string(parse_spec("nccl:1536:xring")) == "nccl:1536:xring");
  CHECK(to_string(parse_spec("nccl/xring").ranges[0]) == "nccl/xring");
}

TEST_CASE("spec.rejections") {
  CHECK(parse_error("nccl/xrng") ==
        "parameter spec 'nccl/xrng': unknown algorithm 'xrng' (known: xring, ring, rechd, halving-doubling, pscpu, "
        "shuffle-cpu, psgpu, shuffle-gpu, shuffle, hiercopy, hierarchical-copy, nccl, mring, multi-ring, tree, "
        "double-binary-tree, 2d, 2d-hierarchical, trees, tree-packing, trees2, tree-packing-two-phase, rbtrees, "
        "reduce-broadcast-trees, prings, ring-packing)");
  CHECK(parse_error("foo#2").find("parameter spec 'foo#2': unknown algorithm 'foo' (known: ") == 0);
  CHECK(parse_error("Xring").find("unknown algorithm 'Xring'") != std::string::npos);
  CHECK(parse_error("xring#0") == "parameter spec 'xring#0': 'xring#0': #n must be ≥ 1");
  CHECK(parse_error("xring#x") == "parameter spec 'xring#x': 'xring#x': #n must be a positive whole number");
  CHECK(parse_error("xring#") == "parameter spec 'xring#': 'xring#': #n must be a positive whole number");
  CHECK(parse_error("xring#-1") == "parameter spec 'xring#-1': 'xring#-1': #n must be a positive whole number");
  CHECK(parse_error("xring#2#3") == "parameter spec 'xring#2#3': 'xring#2#3': #n must be a positive whole number");
  CHECK(parse_error("xring#99999999") == "parameter spec 'xring#99999999': 'xring#99999999': #n must be ≤ 65536");
  CHECK(parse_error("rechd#2") == "parameter spec 'rechd#2': 'rechd#2': rechd takes no #n argument");
  CHECK(parse_error("nccl#2") == "parameter spec 'nccl#2': 'nccl#2': nccl takes no #n argument");
  CHECK(parse_error("tree#2").find("tree takes no #n argument") != std::string::npos);
  CHECK(parse_error("2d#4").find("2d takes no #n argument") != std::string::npos);
  CHECK(parse_error("#2") == "parameter spec '#2': '#2': missing algorithm name before '#'");
  CHECK(parse_error("") == "parameter spec '': empty spec (e.g. xring, nccl, nccl/xring, pscpu:64K:xring)");
  CHECK(parse_error(":") == "parameter spec ':': empty range (expected alg[#n] or alg[#n]/alg[#n])");
  CHECK(parse_error("xring::nccl") ==
        "parameter spec 'xring::nccl': empty limit between ':' (expected alg:limit:alg, e.g. xring:64K:nccl)");
  CHECK(parse_error("xring:64K:") == "parameter spec 'xring:64K:': empty range (expected alg[#n] or alg[#n]/alg[#n])");
  CHECK(parse_error(":64K:xring") == "parameter spec ':64K:xring': empty range (expected alg[#n] or alg[#n]/alg[#n])");
  CHECK(parse_error("xring:64K") ==
        "parameter spec 'xring:64K': limit '64K' has no range after it (the last range must be unlimited)");
  CHECK(parse_error("nccl:64K:xring:32K:pscpu") ==
        "parameter spec 'nccl:64K:xring:32K:pscpu': limit '32K' (32768 elements) must exceed the previous limit (65536 "
        "elements)");
  CHECK(parse_error("nccl:64K:xring:64K:pscpu").find("must exceed the previous limit") != std::string::npos);
  CHECK(parse_error("nccl:64X:xring") ==
        "parameter spec 'nccl:64X:xring': limit '64X' is not a whole number of elements with optional K/M/G/T suffix");
  CHECK(parse_error("nccl:K:xring").find("limit 'K' is not a whole number") != std::string::npos);
  CHECK(parse_error("nccl:-5:xring").find("limit '-5' is not a whole number") != std::string::npos);
  CHECK(parse_error("nccl:0:xring") == "parameter spec 'nccl:0:xring': limit '0' must be ≥ 1");
  CHECK(parse_error("nccl:99999999999999T:xring").find("is too large") != std::string::npos);
  CHECK(parse_error("xring/nccl") ==
        "parameter spec 'xring/nccl': 'xring/nccl': xring/nccl is not a supported hierarchy (supported: pscpu/xring, "
        "pscpu/pscpu, pscpu/rechd, nccl/xring, nccl/rechd, nccl/pscpu, nccl/shuffle)");
  CHECK(parse_error("nccl/nccl").find("nccl/nccl is not a supported hierarchy") != std::string::npos);
  CHECK(parse_error("nccl/xring/pscpu") ==
        "parameter spec 'nccl/xring/pscpu': 'nccl/xring/pscpu': at most two levels (intra/inter machine)");
  CHECK(parse_error("nccl/") == "parameter spec 'nccl/': 'nccl/': empty level around '/'");
  CHECK(parse_error("/xring") == "parameter spec '/xring': '/xring': empty level around '/'");
  CHECK(parse_error("nccl/xrnig#2").find("unknown algorithm 'xrnig'") != std::string::npos);
  CHECK(parse_error("xring ").find("unknown algorithm 'xring '") != std::string::npos);
  CHECK_THROWS_AS(AllReduceSpec{}.pick(1), InvalidInput);
}

TEST_CASE("spec.nccl_variants_with_channels") {
  // nccl.ALGO[.PROTO][.cN]: the variant is kept canonical on the token.
  CHECK(parse_spec("nccl.ring.simple.c8").ranges[0].intra == AlgToken{"nccl", -1, "ring.simple.c8"});
  CHECK(parse_spec("nccl.tree.c2").ranges[0].intra == AlgToken{"nccl", -1, "tree.c2"});
  CHECK(to_string(parse_spec("nccl.ring.ll.c16:64K:nccl.ring.simple")) == "nccl.ring.ll.c16:64K:nccl.ring.simple");
  CHECK(parse_nccl_variant("nvls.simple.c4", "x") == NcclVariant{"nvls", "simple", 4});
  CHECK(parse_nccl_variant("ring.c64", "x") == NcclVariant{"ring", "", 64});
  CHECK(parse_nccl_variant("", "x") == NcclVariant{});
  CHECK(to_string(NcclVariant{"tree", "ll128", 3}) == "tree.ll128.c3");
  CHECK_THROWS_WITH_AS(parse_spec("nccl.ring.simple.c0"),
                       "parameter spec 'nccl.ring.simple.c0': 'nccl.ring.simple.c0': NCCL channel count 'c0' is not c1..c64 "
                       "(e.g. nccl.ring.simple.c8)",
                       InvalidInput);
  CHECK_THROWS_WITH_AS(parse_nccl_variant("ring.c65", "x"),
                       "x: NCCL channel count 'c65' is not c1..c64 (e.g. nccl.ring.simple.c8)", InvalidInput);
  CHECK_THROWS_WITH_AS(parse_nccl_variant("ring.c8.ll", "x"),
                       "x: 'ring.c8.ll' after the NCCL choice (expected ALGO[.PROTO][.cN], e.g. ring.ll128.c8)",
                       InvalidInput);
  CHECK_THROWS_WITH_AS(parse_nccl_variant("c8", "x"),
                       "x: unknown NCCL algorithm 'c8' (tree, ring, nvls, nvlstree, pat)", InvalidInput);
  CHECK_THROWS_WITH_AS(parse_nccl_variant("ring.fast", "x"), "x: unknown NCCL protocol 'fast' (ll, ll128, simple)",
                       InvalidInput);
}
