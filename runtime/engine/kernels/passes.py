"""The kernels that walk Python objects rather than arrays: the snapshot's passes over the
cluster's pods (runtime.engine.snapshot.build_snapshot) and the cycle's decisions from the
session's arrays (runtime.engine.cycle.collect).

- `scan_pods`: one pass over the state's pods: distinct request maps, the pods holding room
  on nodes, and our scheduler's pods with their job, priority, creation, status and node;
- `group_tasks`: our pods as tasks, jobs by name (a counting sort), each job's tasks by
  priority (descending), creation, uid: usually already so, checked in one pass per job;
- `task_columns`: each pending task's class (pods without node constraints or tolerations are
  classed by their request row alone);
- `node_usage`: the room every pod on a node holds, whoever's it is;
- `build_jobs`: the jobs (`JobInfo`) from the grouped tasks;
- `placements`: a Binding for each task the cycle allocated, the node of each one it pipelined;
- `podgroup_statuses`: each PodGroup's phase after the cycle and its condition.

Pods are read, and jobs and decisions built, through their fields' slots (the classes are slots
dataclasses): `slot_member(cls, name)` is a field's handle, `get_slot` / `set_slot` read and
write it, `new_instance` makes an instance with its slots unset (its __new__ without __init__;
every field is then set). Compiled, a handle is the field's PyMemberDef and CPython's member API
reads the member at its fixed offset: `pod.field` from C costs an attribute lookup (type MRO
walk, then the descriptor call), which over 20,000 pods a cycle is most of the snapshot's pass,
and a dataclass's generated __init__ most of building 20,000 bindings. Interpreted, a handle is
the field's member descriptor, read and written through its __get__ / __set__: the same member.

The typed views of arrays are taken of Python memoryviews of them (`memoryview(a)`): compiled,
once a call, it costs nothing that matters; interpreted, indexing a memoryview costs a third of
indexing a numpy array, and yields Python numbers.

One source, compiled or interpreted (Cython's pure-Python mode: runtime/engine/kernels/__init__.py);
passes.pxd declares the C side (the CPython API and the handles' type).
"""

from __future__ import annotations     # the annotations name C types of passes.pxd: never evaluated

import types

import cython
import numpy as np

from runtime.cluster.decisions import Binding, PodGroupStatus
from runtime.cluster.model import (
    PG_COMPLETED, PG_INQUEUE, PG_PENDING, PG_RUNNING, QUEUE_ANNOTATION, Condition, Pod,
)
from runtime.cluster.numa import NUMA_POLICY_ANNOTATION
from runtime.engine.kernels import codes
from runtime.engine.kernels.records import JobColumns, JobInfo, PodScan, TaskColumns, TaskOrder, min_resource_vector

# Typed copies (C globals when compiled) of the task statuses.
PENDING = cython.declare(cython.schar, codes.PENDING)
ALLOCATED = cython.declare(cython.schar, codes.ALLOCATED)
PIPELINED = cython.declare(cython.schar, codes.PIPELINED)
BOUND = cython.declare(cython.schar, codes.BOUND)
RELEASING = cython.declare(cython.schar, codes.RELEASING)
SUCCEEDED = cython.declare(cython.schar, codes.SUCCEEDED)
HELD = cython.declare(cython.schar, codes.HELD)


# --- slots ------------------------------------------------------------------------------------

@cython.cfunc
def slot_member(cls: type, name: str) -> Field:
    """The handle of field `name` of the slots class `cls`."""
    descr = None
    for klass in cls.__mro__:
        if name in klass.__dict__:
            descr = klass.__dict__[name]
            break
    if type(descr) is not types.MemberDescriptorType:
        raise TypeError(f"{cls.__name__}.{name} is not a slot (declare the dataclass with slots=True)")
    if cython.compiled:
        return cython.cast(cython.pointer(PyMemberDescrObject), cython.cast(cython.pointer(PyObject), descr)).d_member
    else:
        return descr


@cython.cfunc
@cython.inline
def get_slot(obj: object, m: Field) -> object:
    if cython.compiled:
        return PyMember_GetOne(cython.cast(cython.p_const_char, cython.cast(cython.pointer(PyObject), obj)), m)
    else:
        return m.__get__(obj)


@cython.cfunc
@cython.inline
def set_slot(obj: object, m: Field, value: object) -> cython.int:
    if cython.compiled:
        return PyMember_SetOne(cython.cast(cython.p_char, cython.cast(cython.pointer(PyObject), obj)), m, value)
    else:
        m.__set__(obj, value)
        return 0


_NO_ARGS = cython.declare(tuple, ())
# An implicit job's minTaskMember: none, one read-only mapping shared by them all (a cycle
# makes thousands of such jobs).
NO_ROLES = types.MappingProxyType({})


@cython.cfunc
@cython.inline
def new_instance(cls: type) -> object:
    if cython.compiled:
        return cython.cast(cython.pointer(PyTypeObject), cls).tp_new(
            cls, cython.cast(cython.pointer(PyObject), _NO_ARGS), cython.NULL)
    else:
        return object.__new__(cls)


M_REQUESTS = slot_member(Pod, "requests")
M_PHASE = slot_member(Pod, "phase")
M_SCHEDULER = slot_member(Pod, "scheduler_name")
M_NODE = slot_member(Pod, "node_name")
M_RELEASING = slot_member(Pod, "releasing")
M_PRIORITY = slot_member(Pod, "priority")
M_PRIORITY_CLASS = slot_member(Pod, "priority_class")
M_NAMESPACE = slot_member(Pod, "namespace")
M_NAME = slot_member(Pod, "name")
M_GROUP = slot_member(Pod, "group")
M_CREATION = slot_member(Pod, "creation")
M_UID = slot_member(Pod, "uid")
M_SELECTOR = slot_member(Pod, "node_selector")
M_REQUIRED = slot_member(Pod, "required_terms")
M_PREFERRED = slot_member(Pod, "preferred_terms")
M_TOLERATIONS = slot_member(Pod, "tolerations")
M_ANNOTATIONS = slot_member(Pod, "annotations")
M_RULES = slot_member(Pod, "rules")
M_GATES = slot_member(Pod, "scheduling_gates")
M_UNSUPPORTED = slot_member(Pod, "unsupported")
M_HELD = slot_member(Pod, "held_back")
M_LABELS = slot_member(Pod, "labels")
M_VOLUMES = slot_member(Pod, "volumes")
M_CLAIMS = slot_member(Pod, "resource_claims")

J_INDEX = slot_member(JobInfo, "index")
J_KEY = slot_member(JobInfo, "key")
J_PODGROUP = slot_member(JobInfo, "podgroup")
J_IMPLICIT = slot_member(JobInfo, "implicit")
J_QUEUE = slot_member(JobInfo, "queue")
J_QUEUE_NAME = slot_member(JobInfo, "queue_name")
J_MIN_MEMBER = slot_member(JobInfo, "min_member")
J_MIN_TASK = slot_member(JobInfo, "min_task_member")
J_MIN_RES = slot_member(JobInfo, "min_resources")
J_PRIORITY = slot_member(JobInfo, "priority")
J_CREATION = slot_member(JobInfo, "creation")
J_UID = slot_member(JobInfo, "uid")
J_PHASE = slot_member(JobInfo, "phase")
J_TASKS = slot_member(JobInfo, "tasks")
J_PROBLEM = slot_member(JobInfo, "problem")

B_POD = slot_member(Binding, "pod")
B_NODE = slot_member(Binding, "node")
B_DEVICES = slot_member(Binding, "devices")
S_NAME = slot_member(PodGroupStatus, "name")
S_PHASE = slot_member(PodGroupStatus, "phase")
S_CONDITIONS = slot_member(PodGroupStatus, "conditions")
C_TYPE = slot_member(Condition, "type")
C_STATUS = slot_member(Condition, "status")
C_REASON = slot_member(Condition, "reason")
C_MESSAGE = slot_member(Condition, "message")


# --- request maps -----------------------------------------------------------------------------

@cython.cfunc
def items_key(requests: dict) -> tuple:
    """The request map as one flat tuple (name, amount, name, amount, ...): its identity."""
    if cython.compiled:
        key: tuple = PyTuple_New(2 * len(requests))
        pos: cython.Py_ssize_t = 0
        k: cython.Py_ssize_t = 0
        name: cython.pointer(PyObject)
        amount: cython.pointer(PyObject)
        while PyDict_Next(requests, cython.address(pos), cython.address(name), cython.address(amount)):
            Py_INCREF(cython.cast(object, name))
            PyTuple_SET_ITEM(key, k, cython.cast(object, name))
            Py_INCREF(cython.cast(object, amount))
            PyTuple_SET_ITEM(key, k + 1, cython.cast(object, amount))
            k += 2
        return key
    else:
        return tuple([x for item in requests.items() for x in item])


@cython.cfunc
@cython.exceptval(-1)
def same_items(a: dict, b: dict) -> cython.bint:
    """Whether two request maps have equal items in the same order (equal items_key)."""
    if len(a) != len(b):
        return False
    if cython.compiled:
        pa: cython.Py_ssize_t = 0
        pb: cython.Py_ssize_t = 0
        ka: cython.pointer(PyObject)
        va: cython.pointer(PyObject)
        kb: cython.pointer(PyObject)
        vb: cython.pointer(PyObject)
        while PyDict_Next(a, cython.address(pa), cython.address(ka), cython.address(va)):
            PyDict_Next(b, cython.address(pb), cython.address(kb), cython.address(vb))
            if (not (ka == kb or cython.cast(object, ka) == cython.cast(object, kb))
                    or not (va == vb or cython.cast(object, va) == cython.cast(object, vb))):
                return False
        return True
    else:
        return tuple(a.items()) == tuple(b.items())


# --- the snapshot's passes over the pods ------------------------------------------------------

def same_objects(a: list, b: list) -> np.ndarray:
    """bool per position i of `a`: whether a[i] is b[i] (b at least as long). The pod scan memo
    asks it of every pod each cycle (which pods are the objects it read before)."""
    i: cython.Py_ssize_t
    n: cython.Py_ssize_t = len(a)
    if len(b) < n:
        raise ValueError("same_objects: b is shorter than a")
    out = np.zeros(n, dtype=np.uint8)
    flags: cython.uchar[::1] = out
    for i in range(n):
        flags[i] = a[i] is b[i]
    return out.view(bool)


def scan_pods(pods: dict, scheduler_name: str, priority_classes: dict, default_priority, node_pos: dict,
              fold: cython.bint = False) -> PodScan:
    """One pass over the state's pods: distinct request maps, the pods holding room on nodes,
    our scheduler's pods with their job, priority, creation, status and node. With `fold`, our
    settled lone pods are counted per queue and request map instead (PodScan.settled)."""
    n: cython.Py_ssize_t = len(pods)
    t: cython.Py_ssize_t = 0
    p: cython.Py_ssize_t = 0
    sid: cython.Py_ssize_t
    j: cython.Py_ssize_t
    shape_index: dict = {}
    job_index: dict = {}
    settled: dict = {}
    requests: dict
    last_requests: dict = None
    shapes: list = []
    ours: list = []
    keys: list = []
    job_names: list = []
    rule_pods: list = []
    volume_pods: list = []
    volume_tasks: list = []
    asking_tasks: list = []
    placed_node = np.empty(n, dtype=np.int64)
    placed_shape = np.empty(n, dtype=np.int64)
    placed_gone = np.empty(n, dtype=np.uint8)
    placed_mine = np.empty(n, dtype=np.uint8)
    placed_at = np.empty(n, dtype=np.int64)
    shape = np.empty(n, dtype=np.int64)
    job = np.empty(n, dtype=np.int64)
    priority = np.empty(n, dtype=np.int64)
    creation = np.empty(n, dtype=np.float64)
    status = np.empty(n, dtype=np.int8)
    node_of = np.empty(n, dtype=np.int64)
    plain = np.empty(n, dtype=np.uint8)
    pn: cython.longlong[::1] = memoryview(placed_node)
    ps: cython.longlong[::1] = memoryview(placed_shape)
    sh: cython.longlong[::1] = memoryview(shape)
    jb: cython.longlong[::1] = memoryview(job)
    pr: cython.longlong[::1] = memoryview(priority)
    nd: cython.longlong[::1] = memoryview(node_of)
    pg: cython.uchar[::1] = memoryview(placed_gone)
    pm: cython.uchar[::1] = memoryview(placed_mine)
    pa: cython.longlong[::1] = memoryview(placed_at)
    i: cython.Py_ssize_t = -1
    run: cython.Py_ssize_t = 0          # settled pods counted in a row under (run_queue, run_sid)
    run_sid: cython.Py_ssize_t = -1
    run_queue = None
    pl: cython.uchar[::1] = memoryview(plain)
    cr: cython.double[::1] = memoryview(creation)
    st: cython.schar[::1] = memoryview(status)
    last_namespace = None
    last_name = None
    last_sid: cython.Py_ssize_t = -1
    last_j: cython.Py_ssize_t = -1
    phase: str
    scheduler: str
    mine: cython.bint
    gone: cython.bint
    where: cython.longlong
    for key, pod in pods.items():
        i += 1
        if not isinstance(pod, Pod):
            raise TypeError(f"state.pods[{key!r}] is a {type(pod).__name__}, not a Pod")
        requests = get_slot(pod, M_REQUESTS)
        # Pods of a job come in a row with equal requests: the last pod's shape, unhashed.
        if last_requests is not None and same_items(requests, last_requests):
            sid = last_sid
        else:
            items = items_key(requests)
            found = shape_index.get(items)
            if found is None:
                sid = len(shapes)
                shape_index[items] = sid
                shapes.append(requests)
            else:
                sid = found
            last_requests, last_sid = requests, sid
        phase = get_slot(pod, M_PHASE)
        scheduler = get_slot(pod, M_SCHEDULER)
        mine = scheduler == scheduler_name
        node = get_slot(pod, M_NODE)
        where = -1
        gone = False
        if (get_slot(pod, M_RULES) is not None and phase != "Succeeded" and phase != "Failed"
                and (node or mine)):
            rule_pods.append(pod)
        if (get_slot(pod, M_VOLUMES) is not None and phase != "Succeeded" and phase != "Failed"
                and (node or mine)):
            volume_pods.append(pod)
        if node:
            found = node_pos.get(node)
            if found is not None:
                where = found
            elif phase != "Succeeded" and phase != "Failed":
                # Bound to a node that is gone (deleted; the pod garbage collector has not
                # removed the pod yet): it holds room nowhere and counts in no queue.
                found = shape_index.get(())
                if found is None:
                    found = len(shapes)
                    shape_index[()] = found
                    shapes.append({})
                sid = found
            gone = True if get_slot(pod, M_RELEASING) else False
            if phase != "Succeeded" and phase != "Failed":
                pn[p] = where
                ps[p] = sid
                pg[p] = gone
                pm[p] = mine
                pa[p] = i
                p += 1
        if mine and phase != "Failed":
            if fold and not get_slot(pod, M_GROUP) and (phase == "Succeeded" or (node and not gone)):
                if phase != "Succeeded":
                    # Counted in runs: a Deployment's replicas come in a row, one queue and request.
                    queue = get_slot(pod, M_ANNOTATIONS).get(QUEUE_ANNOTATION)
                    if run > 0 and sid == run_sid and queue == run_queue:
                        run += 1
                    else:
                        if run > 0:
                            settled[(run_queue, run_sid)] = settled.get((run_queue, run_sid), 0) + run
                        run_queue, run_sid, run = queue, sid, 1
                continue
            prio = get_slot(pod, M_PRIORITY)
            if prio is None:
                pclass = get_slot(pod, M_PRIORITY_CLASS)
                prio = priority_classes.get(pclass, default_priority) if pclass is not None else default_priority
            namespace = get_slot(pod, M_NAMESPACE)
            name = get_slot(pod, M_GROUP)
            if not name:
                name = get_slot(pod, M_NAME)
            if last_j >= 0 and name == last_name and namespace == last_namespace:
                j = last_j
            else:
                job_key = (namespace, name)
                found = job_index.get(job_key)
                if found is None:
                    j = len(job_names)
                    job_index[job_key] = j
                    job_names.append(f"{namespace}/{name}")
                else:
                    j = found
                last_namespace, last_name, last_j = namespace, name, j
            ours.append(pod)
            keys.append(key)
            sh[t] = sid
            jb[t] = j
            pr[t] = prio
            cr[t] = get_slot(pod, M_CREATION)
            nd[t] = -1
            pl[t] = False
            if phase == "Succeeded":
                st[t] = SUCCEEDED
            elif node:
                st[t] = RELEASING if gone else BOUND
                nd[t] = where
            elif phase == "Running":
                # Running without a node (as Volcano counts it: a running task, ready, in its
                # queue's allocation), holding room on no node.
                st[t] = BOUND
            else:
                st[t] = HELD if (get_slot(pod, M_GATES) or get_slot(pod, M_UNSUPPORTED)
                                 or get_slot(pod, M_HELD) is not None) else PENDING
                pl[t] = not (get_slot(pod, M_SELECTOR) or get_slot(pod, M_REQUIRED) or get_slot(pod, M_PREFERRED)
                             or get_slot(pod, M_TOLERATIONS) or get_slot(pod, M_RULES) is not None)
                if get_slot(pod, M_VOLUMES) is not None:
                    pl[t] = False
                    volume_tasks.append(t)
                if get_slot(pod, M_CLAIMS) is not None or NUMA_POLICY_ANNOTATION in get_slot(pod, M_ANNOTATIONS):
                    asking_tasks.append(t)
            t += 1
    if run > 0:
        settled[(run_queue, run_sid)] = settled.get((run_queue, run_sid), 0) + run
    return PodScan(shapes, placed_node[:p], placed_shape[:p], placed_gone[:p], placed_mine[:p], ours, keys,
                   shape[:t], job[:t], priority[:t], creation[:t], status[:t], node_of[:t], plain[:t], job_names,
                   settled, rule_pods, volume_pods, volume_tasks, placed_at[:p], asking_tasks)


@cython.cfunc
@cython.exceptval(-1)
def in_task_order(order: cython.const[cython.longlong][::1], lo: cython.Py_ssize_t, hi: cython.Py_ssize_t,
                  pr: cython.const[cython.longlong][::1], cr: cython.const[cython.double][::1],
                  ours: list) -> cython.bint:
    """Whether order[lo:hi] is sorted by (priority descending, creation, uid)."""
    i: cython.Py_ssize_t
    a: cython.Py_ssize_t
    b: cython.Py_ssize_t
    uid_a: str
    uid_b: str
    for i in range(lo + 1, hi):
        a = order[i - 1]
        b = order[i]
        if pr[a] != pr[b]:
            if pr[a] < pr[b]:
                return False
            continue
        if cr[a] != cr[b]:
            if cr[a] > cr[b]:
                return False
            continue
        uid_a = get_slot(ours[a], M_UID)
        uid_b = get_slot(ours[b], M_UID)
        if uid_a > uid_b:
            return False
    return True


def group_tasks(scan) -> TaskOrder:
    """Our pods as tasks: jobs by name (a counting sort), each job's tasks by priority
    (descending), creation, uid."""
    names: list = scan.job_names
    ours: list = scan.ours
    keys: list = scan.keys
    j_n: cython.Py_ssize_t = len(names)
    t_n: cython.Py_ssize_t = len(ours)
    i: cython.Py_ssize_t
    r: cython.Py_ssize_t
    lo: cython.Py_ssize_t
    hi: cython.Py_ssize_t
    jb: cython.const[cython.longlong][::1] = memoryview(scan.job)
    pr: cython.const[cython.longlong][::1] = memoryview(scan.priority)
    cr: cython.const[cython.double][::1] = memoryview(scan.creation)
    by_name = sorted(range(j_n), key=names.__getitem__)
    rank_arr = np.empty(j_n, dtype=np.int64)
    first_arr = np.zeros(j_n + 1, dtype=np.int64)
    order_arr = np.empty(t_n, dtype=np.int64)
    rank: cython.longlong[::1] = memoryview(rank_arr)
    first: cython.longlong[::1] = memoryview(first_arr)
    order: cython.longlong[::1] = memoryview(order_arr)
    for r in range(j_n):
        rank[by_name[r]] = r
    for i in range(t_n):
        first[rank[jb[i]] + 1] += 1
    for r in range(j_n):
        first[r + 1] += first[r]
    fill_arr = first_arr[:j_n].copy()
    fill: cython.longlong[::1] = memoryview(fill_arr)
    for i in range(t_n):
        r = rank[jb[i]]
        order[fill[r]] = i
        fill[r] += 1
    for r in range(j_n):
        lo = first[r]
        hi = first[r + 1]
        if hi - lo > 1 and not in_task_order(order, lo, hi, pr, cr, ours):
            part = sorted(order_arr[lo:hi].tolist(),
                          key=lambda k: (-scan.priority[k], scan.creation[k], ours[k].uid))
            for i in range(hi - lo):
                order[lo + i] = part[i]
    pods: list = [None] * t_n
    task_keys: list = [None] * t_n
    for i in range(t_n):
        pods[i] = ours[order[i]]
        task_keys[i] = keys[order[i]]
    return TaskOrder(order_arr, pods, task_keys, first_arr, [names[j] for j in by_name])


def task_columns(pods: list, status: cython.const[cython.schar][::1], plain: cython.const[cython.uchar][::1],
                 task_shape: cython.const[cython.longlong][::1], row_of_shape: cython.const[cython.longlong][::1],
                 label_keys: tuple = None, extra_keys: dict = None, selectors: object = None) -> TaskColumns:
    """Each pending task's class (0 for the others) and each class's first task: a task
    without node constraints or tolerations (`plain`) is classed by its request row alone.
    With `label_keys` (the label keys inter-pod selectors read), every task is also classed by
    its rules, namespace and those of its labels. `extra_keys` (task -> key) tells apart tasks
    whose claims differ (runtime.engine.rules.volumes: the volumes they are bound to, or the shape of
    the volumes they need). With `selectors` (runtime.cluster.selectors.SelectorSet of the inter-pod
    selectors), tasks are classed by the selectors their labels satisfy instead of by those labels'
    values: pods no rule tells apart share a class."""
    t_n: cython.Py_ssize_t = len(pods)
    t: cython.Py_ssize_t
    row: cython.Py_ssize_t
    cid: cython.Py_ssize_t
    class_arr = np.zeros(t_n, dtype=np.int64)
    plain_class_arr = np.full(row_of_shape.shape[0], -1, dtype=np.int64)
    task_class: cython.longlong[::1] = memoryview(class_arr)
    plain_class: cython.longlong[::1] = memoryview(plain_class_arr)
    keyed: dict = {}
    heads: list = []
    labels: dict
    for t in range(t_n):
        if status[t] != PENDING:
            continue
        row = row_of_shape[task_shape[t]]
        if plain[t] and label_keys is None:
            cid = plain_class[row]
            if cid < 0:
                cid = len(heads)
                plain_class[row] = cid
                heads.append(t)
        else:
            pod = pods[t]
            selector = get_slot(pod, M_SELECTOR)
            key = (row, tuple(sorted(selector.items())) if selector else (), get_slot(pod, M_REQUIRED),
                   get_slot(pod, M_PREFERRED), get_slot(pod, M_TOLERATIONS))
            if label_keys is not None:
                labels = get_slot(pod, M_LABELS)
                key += (get_slot(pod, M_RULES), get_slot(pod, M_NAMESPACE),
                        tuple([(k, labels[k]) for k in label_keys if k in labels]) if selectors is None
                        else selectors.matched(labels))
            if extra_keys is not None:
                key += (extra_keys.get(t),)
            found = keyed.get(key)
            if found is None:
                cid = len(heads)
                keyed[key] = cid
                heads.append(t)
            else:
                cid = found
        task_class[t] = cid
    return TaskColumns(class_arr, heads)


def node_usage(placed_node: cython.const[cython.longlong][::1], placed_shape: cython.const[cython.longlong][::1],
               placed_gone: cython.const[cython.uchar][::1], placed_mine: cython.const[cython.uchar][::1],
               shapes: cython.const[cython.longlong][:, ::1], used: cython.longlong[:, ::1],
               releasing: cython.longlong[:, ::1]) -> cython.Py_ssize_t:
    """Adds each placed pod's request to its node's used (and releasing, when it leaves);
    returns how many of them are other schedulers' pods on known nodes."""
    i: cython.Py_ssize_t
    r: cython.Py_ssize_t
    n: cython.Py_ssize_t
    s: cython.Py_ssize_t
    r_n: cython.Py_ssize_t = shapes.shape[1]
    foreign: cython.Py_ssize_t = 0
    for i in range(placed_node.shape[0]):
        n = placed_node[i]
        if n < 0:
            continue
        s = placed_shape[i]
        for r in range(r_n):
            used[n, r] += shapes[s, r]
        if placed_gone[i]:
            for r in range(r_n):
                releasing[n, r] += shapes[s, r]
        if not placed_mine[i]:
            foreign += 1
    return foreign


def build_jobs(podgroups: dict, priority_classes: dict, default_priority, job_names: list, pods: list,
               job_first: cython.const[cython.longlong][::1], task_priority: cython.const[cython.longlong][::1],
               queue_index: dict, leaf: list, index: dict, r: cython.Py_ssize_t, default_queue: str) -> list:
    """Jobs from the grouped tasks (job j's tasks are job_first[j]:job_first[j+1]): a PodGroup's
    queue, minMember, priority, minResources (a row over `index`'s resources), phase; a pod
    without a group is its own job, in the queue its QUEUE_ANNOTATION names, else
    `default_queue`. `leaf[q]`: queue q has no children."""
    j: cython.Py_ssize_t
    lo: cython.Py_ssize_t
    hi: cython.Py_ssize_t
    j_n: cython.Py_ssize_t = len(job_names)
    q: cython.longlong
    jobs: list = []
    all_tasks = np.arange(job_first[j_n] if j_n else 0, dtype=np.int64)
    for j in range(j_n):
        key = job_names[j]
        lo, hi = job_first[j], job_first[j + 1]
        head = pods[lo]
        head_group = get_slot(head, M_GROUP)
        group = podgroups.get(key) if head_group else None
        problem = None
        if head_group and group is None:
            problem = f"PodGroup {key} does not exist"
        if group is not None:
            problem = group.problem
            queue_name = group.queue
            min_member = group.min_member
            pclass = group.priority_class
            priority = priority_classes.get(pclass, default_priority) if pclass else \
                task_priority[lo] if cython.compiled else int(task_priority[lo])
            min_res = min_resource_vector(group, index, r)
            phase, creation, uid, min_task = group.phase, group.creation, group.uid, dict(group.min_task_member)
        else:
            queue_name = get_slot(head, M_ANNOTATIONS).get(QUEUE_ANNOTATION) or default_queue
            # Compiled, the C integer is made a Python int (int() would call the builtin).
            priority = task_priority[lo] if cython.compiled else int(task_priority[lo])
            min_member, min_res = 1, None
            # An implicit group of a placed pod runs; a waiting one starts Pending like the
            # PodGroup Volcano's controller would create for it.
            phase = PG_RUNNING if get_slot(head, M_NODE) else PG_PENDING
            creation, uid, min_task = get_slot(head, M_CREATION), get_slot(head, M_UID), NO_ROLES
        q = queue_index.get(queue_name, -1)
        if q < 0 and problem is None:
            problem = f"queue {queue_name} does not exist"
        elif q >= 0 and not leaf[q] and problem is None:
            problem = f"queue {queue_name} is not a leaf queue"
        job = new_instance(JobInfo)
        set_slot(job, J_INDEX, j)
        set_slot(job, J_KEY, key)
        set_slot(job, J_PODGROUP, group)
        set_slot(job, J_IMPLICIT, group is None)
        set_slot(job, J_QUEUE, q)
        set_slot(job, J_QUEUE_NAME, queue_name)
        set_slot(job, J_MIN_MEMBER, min_member)
        set_slot(job, J_MIN_TASK, min_task)
        set_slot(job, J_MIN_RES, min_res)
        set_slot(job, J_PRIORITY, priority)
        set_slot(job, J_CREATION, creation)
        set_slot(job, J_UID, uid)
        set_slot(job, J_PHASE, phase)
        set_slot(job, J_TASKS, all_tasks[lo:hi])
        set_slot(job, J_PROBLEM, problem)
        jobs.append(job)
    return jobs


def job_columns(jobs: list) -> JobColumns:
    """The jobs' queue, minMember, priority, creation, and flags (problem, PodGroup, minResources,
    minTaskMember) as arrays."""
    i: cython.Py_ssize_t
    n: cython.Py_ssize_t = len(jobs)
    queue = np.empty(n, dtype=np.int64)
    min_member = np.empty(n, dtype=np.int64)
    priority = np.empty(n, dtype=np.int64)
    creation = np.empty(n, dtype=np.float64)
    problem = np.zeros(n, dtype=np.uint8)
    grouped = np.zeros(n, dtype=np.uint8)
    sized = np.zeros(n, dtype=np.uint8)
    roles = np.zeros(n, dtype=np.uint8)
    q: cython.longlong[::1] = queue
    m: cython.longlong[::1] = min_member
    p: cython.longlong[::1] = priority
    c: cython.double[::1] = creation
    b: cython.uchar[::1] = problem
    g: cython.uchar[::1] = grouped
    z: cython.uchar[::1] = sized
    r: cython.uchar[::1] = roles
    for i in range(n):
        job = jobs[i]
        q[i] = get_slot(job, J_QUEUE)
        m[i] = get_slot(job, J_MIN_MEMBER)
        p[i] = get_slot(job, J_PRIORITY)
        c[i] = get_slot(job, J_CREATION)
        b[i] = get_slot(job, J_PROBLEM) is not None and bool(get_slot(job, J_PROBLEM))
        g[i] = get_slot(job, J_PODGROUP) is not None
        z[i] = get_slot(job, J_MIN_RES) is not None
        r[i] = len(get_slot(job, J_MIN_TASK)) > 0
    return JobColumns(queue, min_member, priority, creation, problem.view(bool), grouped.view(bool),
                      sized.view(bool), roles.view(bool))


# --- the cycle's decisions --------------------------------------------------------------------

def placements(before: cython.const[cython.schar][::1], status: cython.const[cython.schar][::1],
               task_node: cython.const[cython.longlong][::1], task_keys: list, node_names: list,
               task_devices: dict) -> tuple:
    """(bindings, pipelined): tasks pending in the snapshot that the cycle allocated or
    pipelined, in task order."""
    t: cython.Py_ssize_t
    bindings: list = []
    pipelined: dict = {}
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


def podgroup_statuses(jobs: list, job_phase: list, ready: cython.const[cython.longlong][::1],
                      status: cython.const[cython.schar][::1], task_job: cython.const[cython.longlong][::1],
                      waiting) -> list:
    """The status of each explicit PodGroup: Completed when all its tasks succeeded, Running
    with minMember ready (Scheduled condition), back to Inqueue when a running gang fell below
    it; a Pending or Inqueue one takes its condition from `waiting(j, pending, size)`."""
    j: cython.Py_ssize_t
    t: cython.Py_ssize_t
    j_n: cython.Py_ssize_t = len(jobs)
    size: cython.Py_ssize_t
    min_member: cython.longlong
    pending_arr = np.zeros(j_n, dtype=np.int64)
    succeeded_arr = np.zeros(j_n, dtype=np.int64)
    pending: cython.longlong[::1] = memoryview(pending_arr)
    succeeded: cython.longlong[::1] = memoryview(succeeded_arr)
    for t in range(status.shape[0]):
        if status[t] == PENDING:
            pending[task_job[t]] += 1
        elif status[t] == SUCCEEDED:
            succeeded[task_job[t]] += 1
    out: list = []
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
