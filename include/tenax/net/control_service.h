// A handler of some control-message kinds that a role's serving loop hosts
// next to its own protocol: the coordinator hosts sched's link book (the
// probes' reports and link queries) this way, so that coord does not depend
// on sched nor sched on coord (DESIGN: siblings meet only through net).
//
// Threading: called on the serving loop's thread (the Node's), never
// concurrently. Failure: ProtocolError means the sender broke the protocol
// and the serving loop drops it; any other error is logged and the loop
// goes on.
#pragma once

#include <cstdint>

#include "tenax/core/status.h"
#include "tenax/net/node.h"

namespace tenax::net {

class ControlService {
 public:
  virtual ~ControlService() = default;
  virtual bool Handles(uint32_t kind) const = 0;
  // Handles one message of a kind it Handles; may answer through `node`.
  virtual Status Handle(Node& node, const ControlMessage& message) = 0;
};

}  // namespace tenax::net
