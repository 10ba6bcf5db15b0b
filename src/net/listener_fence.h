// Closing a UCX listener without racing its async thread (UCX 1.13).
//
// UCX's TCP connection manager accepts a client on its own async thread and
// keeps the accepted socket pending until the client's first bytes arrive;
// only then does it call the listener back. The pending socket keeps a raw
// pointer to the listener, so bytes arriving after ucp_listener_destroy run
// the callback on freed memory: a SIGSEGV in ucp_cm_server_conn_request_cb
// (seen as exit 139 of a worker that left the job while a joiner connected).
// UCX offers no call that waits for or drops pending accepts, so Node's
// teardown fences them at the kernel level, by port:
//   1. CloseListeningSocket: no new client is accepted (they get a reset);
//   2. the node goes on closing while its listener still exists, so a client
//      accepted before step 1 reaches a live listener (and is rejected);
//   3. CloseAcceptedSockets: whatever is still pending can no longer hear
//      from its client, and the listener may be destroyed.
// "Closing" a socket UCX owns means replacing it in place (dup3) with a
// fresh unconnected socket: the descriptor number stays valid for UCX's own
// later close, but the connection or listening socket behind it is gone,
// and the kernel drops it from UCX's epoll set.
//
// Threading: callable from any thread; they touch only sockets bound to the
// given port. Failure: best effort (no /proc, no socket): nothing is closed
// and the count says so.
#pragma once

#include <cstdint>

namespace tenax::net::internal {

// Closes the listening TCP socket(s) on `port`; returns how many.
int CloseListeningSocket(uint16_t port);

// Closes every connected TCP socket whose local port is `port` (the ones a
// listener on `port` accepted); returns how many.
int CloseAcceptedSockets(uint16_t port);

// While one lives, UCX's complaints about the sockets closed above (a failed
// epoll_ctl(DEL), a handler it could not remove, an accept() that failed)
// are dropped: they are expected, and would read as faults in a run's log.
// Any other UCX message passes.
class QuietListenerTeardown {
 public:
  QuietListenerTeardown();
  ~QuietListenerTeardown();
  QuietListenerTeardown(const QuietListenerTeardown&) = delete;
  QuietListenerTeardown& operator=(const QuietListenerTeardown&) = delete;
};

}  // namespace tenax::net::internal
