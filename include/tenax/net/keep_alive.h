// Long local work while connected: a Node's heartbeats and failure detection
// run only when its owner's thread drives Progress(), so a process that spends
// longer than the peer timeout in local work (decompressing a dataset, loading
// a model) would be declared lost by its peers. RunKeepingAlive runs that work
// on a helper thread while the calling thread (the Node's own) keeps the Node
// progressing.
//
// Contract: `fn` must not touch `node` (Nodes are single-threaded); its result
// or exception is returned or rethrown on the calling thread. The call returns
// once `fn` has; there is no cancellation, so `fn` must end on its own.
#pragma once

#include <chrono>
#include <future>
#include <type_traits>
#include <utility>

#include "tenax/net/node.h"

namespace tenax::net {

template <typename Fn>
std::invoke_result_t<Fn&> RunKeepingAlive(Node& node, Fn&& fn) {
  auto done = std::async(std::launch::async, std::forward<Fn>(fn));
  // 10 ms is far below any heartbeat interval and costs nothing measurable.
  while (done.wait_for(std::chrono::milliseconds(10)) != std::future_status::ready) node.Progress();
  return done.get();
}

}  // namespace tenax::net
