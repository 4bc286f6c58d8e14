// How an mpi rank waits for its peers (artune/executor/mpi/peer_wait.hpp): poll, then yield, and only where
// ranks outnumber cores, sleep for a share of the wait that is capped.
#include <doctest/doctest.h>

#include "artune/executor/mpi/peer_wait.hpp"

using namespace artune;
using namespace std::chrono_literals;

TEST_CASE("peer_wait.polls_first_then_yields_on_a_core_of_its_own") {
  CHECK(peer_wait_step(1, 0ns, false) == PeerWaitStep{});
  CHECK(peer_wait_step(kPeerWaitSpinPolls, 1s, true) == PeerWaitStep{});  // polling never sleeps
  CHECK(peer_wait_step(kPeerWaitSpinPolls + 1, 0ns, false).kind == PeerWaitStep::kYield);
  // Not oversubscribed: a rank never sleeps, however long it waits (latency first).
  CHECK(peer_wait_step(1'000'000, 10s, false).kind == PeerWaitStep::kYield);
}

TEST_CASE("peer_wait.oversubscribed_sleeps_an_eighth_of_the_wait_capped") {
  const int n = kPeerWaitSpinPolls + 1;
  CHECK(peer_wait_step(n, kPeerWaitYieldFor, true).kind == PeerWaitStep::kYield);  // a short wait still yields
  CHECK(peer_wait_step(n, 800us, true) == PeerWaitStep{PeerWaitStep::kSleep, 100us});
  CHECK(peer_wait_step(n, 160us, true) == PeerWaitStep{PeerWaitStep::kSleep, 20us});
  CHECK(peer_wait_step(n, 1s, true) == PeerWaitStep{PeerWaitStep::kSleep, kPeerWaitMaxSleep});
  // The sleep never exceeds an eighth of the wait so far, so it delays the wait's end by at most 12.5 %.
  for (auto waited = kPeerWaitYieldFor + 1ns; waited < 10ms; waited = waited * 3 / 2) {
    const PeerWaitStep s = peer_wait_step(n, waited, true);
    CHECK(s.kind == PeerWaitStep::kSleep);
    CHECK(s.sleep * 8 <= waited);
    CHECK(s.sleep <= kPeerWaitMaxSleep);
  }
}
