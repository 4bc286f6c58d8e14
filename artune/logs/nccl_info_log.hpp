#pragma once
// Reader of NCCL's `NCCL_DEBUG=INFO` log lines (`host:pid:tid [dev] NCCL INFO …`, NVIDIA/nccl src/init.cc,
// graph/*.cc, transport/*.cc, enqueue.cc): what NCCL built and chose for a communicator — its version, ranks
// and machines, the rings of every channel (`Channel 00/08 :    0   1   2 …`), the trees, the network
// devices it opened (`NET/IB : Using [0]mlx5_0:1/IB …`) and which of them each channel's network connections
// use (`Channel 00/0 : 7[7] -> 8[0] [send] via NET/IB/0`), its graph search results (`Pattern 4, crossNic 0,
// nChannels 8, bw 40.000000/40.000000, type NVL/PIX, sameChannels 1`, and the fallback `Could not find a path
// for pattern …`), the environment it read (`NCCL_ALGO set by environment to ring`), the cost table NCCL prints at
// init (`Algorithm | Tree … |`, `AllReduce | 15.2/ 43.6 | …`), and the TUNING lines'
// picks (`AllReduce: 4194304 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..7}` in 2.25+, `… -> Algo 1
// proto 2 time 38.1` before). Other lines are skipped; a recognised line whose fields cannot be read (a ring
// that is not a list of ranks, a pick without its size) is InvalidInput naming the file and line.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace artune::logs {

/// One channel's ring as NCCL prints it once (rank 0's view: the ranks in ring order).
struct InfoRing {
  int channel = 0;
  int channels = 0;        ///< the count after the '/': NCCL's ring channels
  std::vector<int> ranks;  ///< ranks in ring order
  int line = 0;
};

/// One rank's place in one channel's tree (`[c] d0/d1/d2->rank->up`).
struct InfoTreeNode {
  int channel = 0;
  int rank = 0;
  int up = -1;                       ///< parent rank, -1 for the root
  std::vector<int> down;             ///< children (-1 entries dropped)
};

/// A network device of one host (`[0]mlx5_0:1/IB`, `[0]eth0:10.1.2.3<0>` for sockets).
struct InfoNetDevice {
  std::string host;
  std::string transport;  ///< "IB", "Socket", or a plugin's name
  int index = 0;          ///< NCCL's device index on that host
  std::string name;       ///< "mlx5_0", "eth0"
  int port = 0;           ///< IB port (0 for sockets)
  std::string link;       ///< "IB", "RoCE", or the socket's address
  int line = 0;
};

/// A network device NCCL made of one or more ports (NIC fusion, NCCL 2.24 on: `NET/IB : Made virtual device [16]
/// name=mlx5_0+mlx5_1 speed=400000 ndevs=2`, printed by net_ib.cc for every device the topology search merged, one
/// port alone too). Channels then connect through these devices: their index follows the ports'.
struct InfoVirtualDevice {
  std::string host;
  std::string transport;  ///< "IB", …
  int index = 0;          ///< NCCL's device index on that host
  std::string name;       ///< the ports' names joined by '+'
  int ports = 1;          ///< ndevs
  int line = 0;
};

/// One network connection of a channel (`Channel 02/0 : 7[7] -> 8[0] [send] via NET/IB/1`).
struct InfoNetConnection {
  std::string host;
  int channel = 0;
  int from_rank = 0, to_rank = 0;
  bool send = true;
  std::string transport;  ///< "IB", "Socket", …
  int device = 0;         ///< NCCL's network device index on the host that prints the line
  int line = 0;
};

/// One graph search result (`Pattern 4, crossNic 0, nChannels 8, bw 40/40, type NVL/PIX, sameChannels 1`).
struct InfoGraph {
  int pattern = 0;
  int cross_nic = 0;
  int channels = 0;
  double bw_intra = 0, bw_inter = 0;  ///< GB/s per channel
  std::string type_intra, type_inter;  ///< "NVL", "PIX", "PXB", "PHB", "SYS", "NET", …
  int line = 0;
};

/// One TUNING pick (rank 0 prints one per collective call).
struct InfoPick {
  std::string function;  ///< "AllReduce", "AllGather", …; "" in releases before 2.23
  std::uint64_t bytes = 0;
  std::string algo;      ///< "ring", "tree", "nvls", "nvlstree", "collnetdirect", "collnetchain", "pat"
  std::string proto;     ///< "ll", "ll128", "simple"
  int channel_lo = -1, channel_hi = -1;  ///< 2.25+: the channels it ran on
  double time_us = -1;   ///< before 2.25: NCCL's estimate
  int line = 0;
};

/// One cell of the cost table NCCL prints at init (`NCCL_DEBUG_SUBSYS=TUNING`, src/graph/tuning.cc): for a
/// function, algorithm and protocol, NCCL's latency (µs) and bandwidth (GB/s), as `     AllReduce |    15.2/  43.6 |`
/// under the `Algorithm |` and `Protocol |` header lines of its block.
struct InfoCost {
  std::string function;  ///< "AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Reduce"
  std::string algo;      ///< as InfoPick::algo
  std::string proto;     ///< "ll", "ll128", "simple"
  double latency_us = 0;
  double bandwidth_gbps = 0;  ///< 0: NCCL disabled the pair
  int line = 0;
};

/// Everything a log shows.
struct InfoLog {
  std::string source;
  int info_lines = 0;                 ///< lines with "NCCL INFO"
  std::string nccl_version;           ///< "2.21.5+cuda12.4"; "" when not printed
  int nccl_version_code = 0;
  int nranks = 0;                     ///< from `nranks`/`nRanks` of the init lines (the largest communicator)
  int nnodes = 0;                     ///< from `nNodes` (2.19+); 0 when not printed
  std::vector<std::string> hosts;     ///< hosts of the INFO lines, in order of appearance
  std::vector<InfoRing> rings;        ///< one per channel, as first printed
  std::vector<InfoTreeNode> trees;    ///< every rank's tree entries printed
  std::vector<InfoNetDevice> net_devices;
  std::vector<InfoVirtualDevice> virtual_devices;
  std::vector<InfoNetConnection> net_connections;
  std::vector<InfoGraph> graphs;
  int coll_channels = 0, nvls_channels = 0;  ///< `N coll channels, …, M nvls channels` (0 when not printed)
  int search_fallbacks = 0;           ///< "Could not find a path for pattern …, falling back to simple order"
  std::map<std::string, std::string> env;  ///< "NAME set by environment to VALUE"
  std::vector<InfoPick> picks;
  std::vector<InfoCost> costs;        ///< the first printed cost table (one cell per function × algorithm × protocol)
  std::vector<std::string> warnings;  ///< the text of "NCCL WARN" lines

  /// Whether the text held any NCCL INFO or WARN line.
  bool empty() const { return info_lines == 0 && warnings.empty(); }
  /// Ring channels NCCL built (the count printed with the rings, else the coll channels line).
  int ring_channels() const;
  /// Distinct network devices the connections use, per host (host → device indices).
  std::map<std::string, std::vector<int>> devices_used() const;
  /// The ports behind a device index of a host: a fused device's ndevs, else 1.
  int ports_of(const std::string& host, int device) const;
};

/// Reads the NCCL lines of a text (other lines are skipped); `source` names it in messages.
InfoLog parse_nccl_info(std::string_view text, std::string_view source);
/// Reads a file and parses it.
InfoLog read_nccl_info(const std::string& path);

}  // namespace artune::logs
