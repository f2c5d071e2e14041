"""The codes the kernels and the engine share, declared here once.

runtime.engine.snapshot re-exports the task statuses (the engine imports them from there); the
compiled kernels read them as typed module globals their .pxd declares, set from these values
when the module is imported (so a value is written in this file only)."""

# Task status codes (int8 array `Snapshot.status`).
PENDING = 0
ALLOCATED = 1       # placed this cycle, will bind
PIPELINED = 2       # placed on room that releasing pods will free
BOUND = 3           # running or bound
RELEASING = 4       # being evicted / terminating, still holds its node's resources
SUCCEEDED = 5       # finished: holds nothing, still counts for its gang
HELD = 6            # waiting, but never to be placed as it is: scheduling gates, a field not evaluated, a refused bind

# Placement kinds (int8, the placement kernels' `out_kinds`, and the fit kernel's states).
NO_FIT = 0          # the request fits nowhere on the node
FUTURE = 1          # it fits once releasing pods leave: the placement is pipelined
IDLE = 2            # it fits the node's idle room: the placement is allocated

# "No cap" on a queue's resource: large, yet sums of a few never overflow int64.
UNLIMITED = (2**63 - 1) // 4
