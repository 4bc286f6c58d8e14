// Network kinds' defaults (net_kind.hpp), each with its source.
//
// What NCCL does with a fabric: the net plugin (or NCCL's built-in transport) reports a latency per port
// (ncclNetProperties_t.latency); the ring/tree search copies the chosen port's figure into the graph
// (NVIDIA/nccl src/graph/search.cc, `graph->latencyInter = net->net.latency`), and the tuning model adds it to
// NCCL's NET latency of every network step, and once more for the Simple protocol ("the flush extra latency",
// src/graph/tuning.cc ncclTopoTuneModel, `interLat += graphs[a]->latencyInter`). So NCCL's own estimate of a
// step across an EFA network is its InfiniBand figure plus the plugin's latency (twice under Simple); this model
// times the step the same way unless the topology states another extra step time for the port.
//
// - ib: NCCL's IB verbs transport reports no latency (src/transport/net_ib/init.cc, `props->latency = 0`):
//   NCCL's NET row of hwLatencies is its InfiniBand figure.
// - roce: the same transport drives RoCE ports (NCCL_IB_GID_INDEX, NCCL_IB_ROCE_VERSION_NUM select the RoCE
//   GID): NCCL charges it as InfiniBand.
// - efa: aws-ofi-nccl reports 75 µs for p4d/p4de/p5/p5e (150 for p3dn, 35 for p5en/p6-b200; aws/aws-ofi-nccl
//   src/platform-aws.cpp platform table, and 75 when the platform is unknown), and where the EFA device does not
//   guarantee byte delivery ordering it sets NCCL_PROTO=simple ("the LL/LL128 protocols can lead to data
//   corruption without data delivery ordering", same file, nccl_net_ofi_configure_nccl_proto_simple): the
//   default here is the p4d/p5 figure and Simple only; a port of a p5en states its 35 µs and protocols.
// - socket: NCCL's socket transport reports no latency (src/transport/net_socket.cc, `props->latency = 0`), so
//   NCCL chooses as on InfiniBand; a TCP step's real time is larger, and a topology states it per port
//   (`extra_step_us`) from a measurement of its own: no default is claimed here.
// The efficiency of every kind defaults to the cost model's network efficiency (cost_model.cpp); a port whose
// measured rate is known states its own.

#include "artune/topology/net_kind.hpp"

#include <algorithm>
#include <string>

namespace artune {

namespace {
// aws/aws-ofi-nccl src/platform-aws.cpp: the latency the plugin reports on p4d, p4de, p5, p5e and unknown platforms.
constexpr double kEfaReportedLatencyUs = 75.0;
}  // namespace

NetFigures net_kind_defaults(NetKind kind) noexcept {
  NetFigures f;
  f.kind = kind;
  if (kind == NetKind::kEfa) {
    f.reported_latency_us = kEfaReportedLatencyUs;
    f.protocols = kNetSimple;
  }
  // NCCL's own step estimate: the reported latency on every protocol, once more on Simple (tuning.cc).
  f.extra_step_us[0] = f.extra_step_us[1] = f.reported_latency_us;
  f.extra_step_us[2] = 2 * f.reported_latency_us;
  return f;
}

NetFigures net_figures(const NicNet& net) noexcept {
  NetFigures f = net_kind_defaults(net.kind.value_or(NetKind::kInfiniBand));
  if (net.reported_latency_us >= 0) {
    f.reported_latency_us = net.reported_latency_us;
    f.extra_step_us[0] = f.extra_step_us[1] = net.reported_latency_us;
    f.extra_step_us[2] = 2 * net.reported_latency_us;
  }
  if (net.extra_step_us >= 0) f.extra_step_us[0] = f.extra_step_us[1] = f.extra_step_us[2] = net.extra_step_us;
  if (net.efficiency >= 0) f.efficiency = net.efficiency;
  if (net.protocols >= 0) f.protocols = static_cast<unsigned>(net.protocols);
  return f;
}

NetFigures combine(const std::vector<NetFigures>& ports) noexcept {
  if (ports.empty()) return net_kind_defaults(NetKind::kInfiniBand);
  NetFigures f = ports.front();
  for (const NetFigures& p : ports) {
    f.reported_latency_us = std::max(f.reported_latency_us, p.reported_latency_us);
    for (int i = 0; i < 3; ++i) f.extra_step_us[i] = std::max(f.extra_step_us[i], p.extra_step_us[i]);
    if (p.efficiency >= 0) f.efficiency = f.efficiency < 0 ? p.efficiency : std::min(f.efficiency, p.efficiency);
    f.protocols &= p.protocols;
  }
  return f;
}

std::vector<std::string_view> protocol_names(unsigned protocols) {
  std::vector<std::string_view> out;
  for (int p = 0; p < kNcclProtos; ++p) {
    if ((protocols & nccl_proto_bit(static_cast<NcclProto>(p))) != 0) out.push_back(kNcclProtoNames[p].spec);
  }
  return out;
}

std::string protocols_text(unsigned protocols) {
  std::string out;
  for (const std::string_view name : protocol_names(protocols)) {
    if (!out.empty()) out += ",";
    out += name;
  }
  return out;
}

}  // namespace artune
