// What one process needs to hold thousands of connections: a coordinator
// or a parameter-server shard facing a fleet of workers.
//
// UCX 1.13 queues the socket events its async thread cannot hand over at
// once in a per-worker queue of `async_max_events` entries (1024 by default,
// read from UCX_ASYNC_MAX_EVENTS when libucs loads). Past about 1020
// connections that queue overflows: UCX resets new connections, later drops
// every one of them ("silent for 10000 ms") and the process crashed on exit
// (docs/benchmarks.md, coord-load at 5,000 members). And a Debian machine's
// soft limit on open files is often 1024, about 3 per connection.
//
// Both are raised by Node::Create when NodeOptions::max_peers says so; they
// are process-wide and only ever raised, never lowered.
//
// Threading: call before the Nodes whose workers should get the new limit
// are created (UCX reads it when a worker is made); not concurrently with
// Node::Create on another thread.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tenax::net {

// The connections a server facing a fleet makes room for (NodeOptions::
// max_peers of the coordinator and of each parameter-server shard): beyond
// any job's workers (1024 at most), their spares and watchers.
constexpr size_t kFleetPeers = 16384;

// Raises the soft limit on open files to the hard one (to the kernel's
// fs.nr_open where the hard limit is unlimited: no process may open more).
// Returns the soft limit afterwards (-1: unlimited or unknown).
int64_t RaiseOpenFileLimit();

// The highest soft limit on open files RaiseOpenFileLimit can reach here:
// the hard limit, or fs.nr_open below an unlimited one (-1: unknown).
int64_t ReachableOpenFileLimit();

// Raises UCX's async event limit to at least `events`. Returns the limit in
// force afterwards.
unsigned RaiseAsyncEventLimit(unsigned events);

// UCX's async event limit in force in this process.
unsigned AsyncEventLimit();

// The async event limit a node expecting `peers` connections asks for:
// room for each peer's sockets (control, data, streams) and a margin.
unsigned AsyncEventsFor(size_t peers);

}  // namespace tenax::net
