#pragma once
// Per-device and per-process slices of a plan, shared by every backend.
//
// A plan is one global DAG. A backend runs it as many local programs: each
// device (cpu, cuda threads/streams) or each process (mpi, nccl ranks) gets
// the ordered list of its own actions. A transfer becomes a send on the
// source side and a receive on the destination side, matched by the op id
// (the message tag); dependencies keep only the ops that have a part on the
// same device (or process) — the plan's locality rule guarantees that this
// plus message matching preserves every ordering the DAG asks for.
//
// Actions are in plan order (ascending op ids). A backend that starts any
// action whose deps are done, in any order, never deadlocks: the smallest
// unfinished op always has all its deps done on every side. Group actions on
// the same member list must be started in plan order (libraries match
// collectives by call order).

#include <cstdint>
#include <string_view>
#include <vector>

#include "artune/algorithms/plan.hpp"

namespace artune {

class Topology;

/// What a local action does.
enum class ActionKind {
  kSend,    ///< send `local` to `peer` (tag = op)
  kRecv,    ///< receive from `peer` into `local` (copy, or reduce when `reduce`)
  kCopy,    ///< local := remote, both on this device/process
  kReduce,  ///< local := local ⊕ remote, both on this device/process
  kScale,   ///< local := local / divisor
  kGroup,   ///< take part in the op's collective with `local` as this member's region
};

/// One step of a device's or process's program.
struct Action {
  ActionKind kind = ActionKind::kCopy;
  int op = -1;            ///< plan op id: message tag and completion key
  int device = -1;        ///< plan device the action runs on (kSend: source; kGroup: this member)
  int peer = -1;          ///< kSend: destination device; kRecv/kCopy/kReduce: source device
  Location local;         ///< region written (kRecv/kCopy/kReduce/kScale/kGroup) or read (kSend)
  Location remote;        ///< kRecv: the sender's region; kCopy/kReduce: the source region
  bool reduce = false;    ///< kRecv: combine into `local` instead of overwriting it
  std::vector<int> deps;  ///< ops whose local part must be complete before this action starts
  friend bool operator==(const Action&, const Action&) = default;
};

/// The program of one plan device.
struct DeviceSchedule {
  int device = -1;              ///< plan device
  std::vector<Action> actions;  ///< in plan order
};

/// The program of one process hosting several plan devices.
struct ProcessSchedule {
  int process = -1;             ///< process (MPI rank)
  std::vector<int> devices;     ///< plan devices hosted here, ascending
  std::vector<Action> actions;  ///< in plan order; transfers between hosted devices are kCopy/kReduce
};

/// Name of an action kind ("send", "recv", "copy", "reduce", "scale", "group").
std::string_view to_string(ActionKind kind) noexcept;

/// Checks what a backend relies on to stay memory safe (devices, buffers and regions in
/// bounds, equal src/dst counts, deps on earlier ops sharing a device, valid distinct group
/// members and root, positive divisors, no src/dst overlap); InvalidInput "plan: op N: …".
/// The static verifier proves much more; this runs even on plans that bypassed it.
void check_plan_shape(const Plan& plan);

/// True when `other` is `prepared` built for another count: the same devices, number of buffers per device,
/// ops, deps, groups and divisors, differing only in element ranges and buffer sizes. A backend whose buffers
/// hold `other`'s can then re-target `prepared`'s compiled state to it (Backend::retarget).
bool same_shape(const Plan& prepared, const Plan& other);

/// One program per plan device (index = device): every remote edge as a send/receive pair.
std::vector<DeviceSchedule> split_by_device(const Plan& plan);

/// The program of `process` when plan device d lives on process host_of_device[d]: transfers
/// between two devices of the same process become local kCopy/kReduce actions (on the
/// destination device); a group op yields one kGroup action per hosted member.
ProcessSchedule split_for_process(const Plan& plan, const std::vector<int>& host_of_device, int process);

/// Where each plan device lives when one process runs per participant: participant r on process r,
/// a helper on the lowest-numbered participant of the same machine (`machine_of_device`, one
/// entry per plan device), or on process 0 when its machine has no participant.
std::vector<int> host_processes(const Plan& plan, const std::vector<int>& machine_of_device);
/// The topology machine of every plan device (the machine of its topology node).
std::vector<int> device_machines(const Plan& plan, const Topology& topo);

/// Distinct member lists of the plan's group ops, in order of first appearance (communicators
/// to create; rank k of a communicator is member k of the list).
std::vector<std::vector<int>> distinct_groups(const Plan& plan);
/// For each op: the index in distinct_groups() of its member list, or -1 for non-group ops.
std::vector<int> group_index_of_ops(const Plan& plan);

}  // namespace artune
