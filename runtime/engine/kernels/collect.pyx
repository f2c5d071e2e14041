# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The cycle's decisions from the session's arrays (runtime.engine.cycle.collect), compiled:

- `placements`: a Binding for each task the cycle allocated, the node of each one it pipelined;
- `podgroup_statuses`: each PodGroup's phase after the cycle and its condition.

Same algorithms, step for step, as reference.py's twins (the parity tests hold them to it).
The result objects are slots dataclasses built field by field (_slots.pxi): their generated
`__init__` only assigns the fields, and 20,000 bindings a cycle would spend most of this
pass in it.
"""

import numpy as np

from runtime.cluster.decisions import Binding, PodGroupStatus
from runtime.cluster.model import PG_COMPLETED, PG_INQUEUE, PG_PENDING, PG_RUNNING, Condition

include "_slots.pxi"

# Task status codes (runtime.engine.snapshot).
cdef enum:
    PENDING = 0
    ALLOCATED = 1
    PIPELINED = 2
    SUCCEEDED = 5

cdef PyMemberDef *B_POD = slot_member(Binding, "pod")
cdef PyMemberDef *B_NODE = slot_member(Binding, "node")
cdef PyMemberDef *B_DEVICES = slot_member(Binding, "devices")
cdef PyMemberDef *S_NAME = slot_member(PodGroupStatus, "name")
cdef PyMemberDef *S_PHASE = slot_member(PodGroupStatus, "phase")
cdef PyMemberDef *S_CONDITIONS = slot_member(PodGroupStatus, "conditions")
cdef PyMemberDef *C_TYPE = slot_member(Condition, "type")
cdef PyMemberDef *C_STATUS = slot_member(Condition, "status")
cdef PyMemberDef *C_REASON = slot_member(Condition, "reason")
cdef PyMemberDef *C_MESSAGE = slot_member(Condition, "message")


def placements(const signed char[::1] before, const signed char[::1] status, const long long[::1] task_node,
               list task_keys, list node_names, dict task_devices):
    """(bindings, pipelined): tasks pending in the snapshot that the cycle allocated or
    pipelined, in task order."""
    cdef Py_ssize_t t
    cdef list bindings = []
    cdef dict pipelined = {}
    cdef object binding, devices
    for t in range(status.shape[0]):
        if before[t] != PENDING:
            continue
        if status[t] == ALLOCATED:
            devices = task_devices.get(t) if task_devices else None
            binding = new_instance(Binding)
            set_slot(binding, B_POD, task_keys[t])
            set_slot(binding, B_NODE, node_names[task_node[t]])
            set_slot(binding, B_DEVICES, {} if devices is None else devices)
            bindings.append(binding)
        elif status[t] == PIPELINED:
            pipelined[task_keys[t]] = node_names[task_node[t]]
    return bindings, pipelined


def podgroup_statuses(list jobs, list job_phase, const long long[::1] ready, const signed char[::1] status,
                      const long long[::1] task_job, waiting):
    """The status of each explicit PodGroup: Completed when all its tasks succeeded, Running
    with minMember ready (Scheduled condition), back to Inqueue when a running gang fell below
    it; a Pending or Inqueue one takes its condition from `waiting(j, pending, size)`."""
    cdef Py_ssize_t j, t, j_n = len(jobs), size
    pending_arr = np.zeros(j_n, dtype=np.int64)
    succeeded_arr = np.zeros(j_n, dtype=np.int64)
    cdef long long[::1] pending = pending_arr, succeeded = succeeded_arr
    for t in range(status.shape[0]):
        if status[t] == PENDING:
            pending[task_job[t]] += 1
        elif status[t] == SUCCEEDED:
            succeeded[task_job[t]] += 1
    cdef list out = []
    cdef object job, phase, conditions, pgs, condition
    cdef long long min_member
    for j in range(j_n):
        job = jobs[j]
        if job.implicit:
            continue
        phase = job_phase[j]
        size = len(job.tasks)
        min_member = job.min_member
        if size and succeeded[j] == size:
            phase = PG_COMPLETED
        elif phase != PG_PENDING and ready[j] >= min_member and ready[j] > 0:
            phase = PG_RUNNING
        elif phase == PG_RUNNING and ready[j] < min_member:
            phase = PG_INQUEUE
        conditions = ()
        if phase == PG_INQUEUE or phase == PG_PENDING:
            conditions = waiting(j, pending[j], size)
        elif phase == PG_RUNNING:
            condition = new_instance(Condition)
            set_slot(condition, C_TYPE, "Scheduled")
            set_slot(condition, C_STATUS, "True")
            set_slot(condition, C_REASON, "Scheduled")
            set_slot(condition, C_MESSAGE, f"{ready[j]}/{size} tasks ready")
            conditions = (condition,)
        pgs = new_instance(PodGroupStatus)
        set_slot(pgs, S_NAME, job.key)
        set_slot(pgs, S_PHASE, phase)
        set_slot(pgs, S_CONDITIONS, conditions)
        out.append(pgs)
    return out
