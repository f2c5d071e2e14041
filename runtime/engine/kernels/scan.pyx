# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The snapshot's passes over the cluster's pods (runtime.engine.snapshot.build_snapshot), compiled:

- `scan_pods`: one pass over the state's pods: distinct request maps, the pods holding room
  on nodes, and our scheduler's pods with their job, priority, creation, status and node;
- `group_tasks`: our pods as tasks, jobs by name (a counting sort), each job's tasks by
  priority (descending), creation, uid: usually already so, checked in one pass per job;
- `task_columns`: each pending task's class (pods without node constraints or tolerations are
  classed by their request row alone);
- `node_usage`: the room every pod on a node holds, whoever's it is;
- `build_jobs`: the jobs (`JobInfo`, built through its slots) from the grouped tasks.

Same algorithms, step for step, as reference.py's twins (the parity tests hold them to it).
Pods are read through their slots (_slots.pxi).
"""

import numpy as np

from cpython.dict cimport PyDict_Next
from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_New, PyTuple_SET_ITEM

from runtime.engine.kernels.records import JobInfo, PodScan, TaskColumns, TaskOrder
from runtime.cluster.model import PG_PENDING, PG_RUNNING, QUEUE_ANNOTATION, Pod

include "_slots.pxi"

# Task status codes (runtime.engine.snapshot).
cdef enum:
    PENDING = 0
    BOUND = 3
    RELEASING = 4
    SUCCEEDED = 5
    HELD = 6

cdef PyMemberDef *M_REQUESTS = slot_member(Pod, "requests")
cdef PyMemberDef *M_PHASE = slot_member(Pod, "phase")
cdef PyMemberDef *M_SCHEDULER = slot_member(Pod, "scheduler_name")
cdef PyMemberDef *M_NODE = slot_member(Pod, "node_name")
cdef PyMemberDef *M_RELEASING = slot_member(Pod, "releasing")
cdef PyMemberDef *M_PRIORITY = slot_member(Pod, "priority")
cdef PyMemberDef *M_PRIORITY_CLASS = slot_member(Pod, "priority_class")
cdef PyMemberDef *M_NAMESPACE = slot_member(Pod, "namespace")
cdef PyMemberDef *M_NAME = slot_member(Pod, "name")
cdef PyMemberDef *M_GROUP = slot_member(Pod, "group")
cdef PyMemberDef *M_CREATION = slot_member(Pod, "creation")
cdef PyMemberDef *M_UID = slot_member(Pod, "uid")
cdef PyMemberDef *M_SELECTOR = slot_member(Pod, "node_selector")
cdef PyMemberDef *M_REQUIRED = slot_member(Pod, "required_terms")
cdef PyMemberDef *M_PREFERRED = slot_member(Pod, "preferred_terms")
cdef PyMemberDef *M_TOLERATIONS = slot_member(Pod, "tolerations")
cdef PyMemberDef *M_ANNOTATIONS = slot_member(Pod, "annotations")
cdef PyMemberDef *M_RULES = slot_member(Pod, "rules")
cdef PyMemberDef *M_GATES = slot_member(Pod, "scheduling_gates")
cdef PyMemberDef *M_UNSUPPORTED = slot_member(Pod, "unsupported")
cdef PyMemberDef *M_HELD = slot_member(Pod, "held_back")
cdef PyMemberDef *M_LABELS = slot_member(Pod, "labels")
cdef PyMemberDef *M_VOLUMES = slot_member(Pod, "volumes")


cdef tuple _items_key(dict requests):
    """The request map as one flat tuple (name, amount, name, amount, ...): its identity."""
    cdef tuple key = PyTuple_New(2 * len(requests))
    cdef Py_ssize_t pos = 0, k = 0
    cdef PyObject *name
    cdef PyObject *amount
    while PyDict_Next(requests, &pos, &name, &amount):
        Py_INCREF(<object> name)
        PyTuple_SET_ITEM(key, k, <object> name)
        Py_INCREF(<object> amount)
        PyTuple_SET_ITEM(key, k + 1, <object> amount)
        k += 2
    return key


cdef bint _same_items(dict a, dict b) except -1:
    """Whether two request maps have equal items in the same order (equal _items_key)."""
    if len(a) != len(b):
        return False
    cdef Py_ssize_t pa = 0, pb = 0
    cdef PyObject *ka
    cdef PyObject *va
    cdef PyObject *kb
    cdef PyObject *vb
    while PyDict_Next(a, &pa, &ka, &va):
        PyDict_Next(b, &pb, &kb, &vb)
        if not (ka == kb or <object> ka == <object> kb) or not (va == vb or <object> va == <object> vb):
            return False
    return True


def scan_pods(dict pods, str scheduler_name, dict priority_classes, default_priority, dict node_pos,
              bint fold=False):
    cdef Py_ssize_t n = len(pods), pos = 0, t = 0, p = 0, sid, j
    cdef PyObject *key_ptr
    cdef PyObject *pod_ptr
    cdef dict shape_index = {}, job_index = {}, settled = {}, requests, last_requests = None
    cdef list shapes = [], ours = [], keys = [], job_names = [], rule_pods = [], volume_pods = [], volume_tasks = []
    placed_node = np.empty(n, dtype=np.int64)
    placed_shape = np.empty(n, dtype=np.int64)
    placed_gone = np.empty(n, dtype=np.uint8)
    placed_mine = np.empty(n, dtype=np.uint8)
    shape = np.empty(n, dtype=np.int64)
    job = np.empty(n, dtype=np.int64)
    priority = np.empty(n, dtype=np.int64)
    creation = np.empty(n, dtype=np.float64)
    status = np.empty(n, dtype=np.int8)
    node_of = np.empty(n, dtype=np.int64)
    plain = np.empty(n, dtype=np.uint8)
    cdef long long[::1] pn = placed_node, ps = placed_shape, sh = shape, jb = job, pr = priority, nd = node_of
    cdef unsigned char[::1] pg = placed_gone, pm = placed_mine, pl = plain
    cdef double[::1] cr = creation
    cdef signed char[::1] st = status
    cdef object pod, node, found, prio, pclass, namespace, name, last_namespace = None, last_name = None, queue_key
    cdef Py_ssize_t last_sid = -1, last_j = -1
    cdef str phase, scheduler
    cdef bint mine, gone
    cdef long long where
    while PyDict_Next(pods, &pos, &key_ptr, &pod_ptr):
        pod = <object> pod_ptr
        if not isinstance(pod, Pod):
            raise TypeError(f"state.pods[{<object> key_ptr!r}] is a {type(pod).__name__}, not a Pod")
        requests = get_slot(pod, M_REQUESTS)
        # Pods of a job come in a row with equal requests: the last pod's shape, unhashed.
        if last_requests is not None and _same_items(requests, last_requests):
            sid = last_sid
        else:
            key = _items_key(requests)
            found = shape_index.get(key)
            if found is None:
                sid = len(shapes)
                shape_index[key] = sid
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
                p += 1
        if mine and phase != "Failed":
            if fold and not get_slot(pod, M_GROUP) and (phase == "Succeeded" or (node and not gone)):
                if phase != "Succeeded":
                    queue_key = ((<dict> get_slot(pod, M_ANNOTATIONS)).get(QUEUE_ANNOTATION), sid)
                    settled[queue_key] = settled.get(queue_key, 0) + 1
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
            keys.append(<object> key_ptr)
            sh[t] = sid
            jb[t] = j
            pr[t] = prio
            cr[t] = get_slot(pod, M_CREATION)
            nd[t] = -1
            pl[t] = 0
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
                st[t] = HELD if get_slot(pod, M_GATES) or get_slot(pod, M_UNSUPPORTED) or get_slot(pod, M_HELD) is not None \
                    else PENDING
                pl[t] = not (get_slot(pod, M_SELECTOR) or get_slot(pod, M_REQUIRED) or get_slot(pod, M_PREFERRED)
                             or get_slot(pod, M_TOLERATIONS) or get_slot(pod, M_RULES) is not None)
                if get_slot(pod, M_VOLUMES) is not None:
                    pl[t] = 0
                    volume_tasks.append(t)
            t += 1
    return PodScan(shapes, placed_node[:p], placed_shape[:p], placed_gone[:p], placed_mine[:p], ours, keys,
                   shape[:t], job[:t], priority[:t], creation[:t], status[:t], node_of[:t], plain[:t], job_names,
                   settled, rule_pods, volume_pods, volume_tasks)


cdef bint _in_task_order(const long long[::1] order, Py_ssize_t lo, Py_ssize_t hi, const long long[::1] pr,
                         const double[::1] cr, list ours) except -1:
    """Whether order[lo:hi] is sorted by (priority descending, creation, uid)."""
    cdef Py_ssize_t i, a, b
    cdef str uid_a, uid_b
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


def group_tasks(scan):
    cdef list names = scan.job_names, ours = scan.ours, keys = scan.keys
    cdef Py_ssize_t j_n = len(names), t_n = len(ours), i, r, lo, hi
    cdef const long long[::1] jb = scan.job
    cdef const long long[::1] pr = scan.priority
    cdef const double[::1] cr = scan.creation
    by_name = sorted(range(j_n), key=names.__getitem__)
    rank_arr = np.empty(j_n, dtype=np.int64)
    first_arr = np.zeros(j_n + 1, dtype=np.int64)
    order_arr = np.empty(t_n, dtype=np.int64)
    cdef long long[::1] rank = rank_arr, first = first_arr, order = order_arr
    for r in range(j_n):
        rank[<Py_ssize_t> by_name[r]] = r
    for i in range(t_n):
        first[rank[jb[i]] + 1] += 1
    for r in range(j_n):
        first[r + 1] += first[r]
    fill_arr = first_arr[:j_n].copy()
    cdef long long[::1] fill = fill_arr
    for i in range(t_n):
        r = rank[jb[i]]
        order[fill[r]] = i
        fill[r] += 1
    for r in range(j_n):
        lo = first[r]
        hi = first[r + 1]
        if hi - lo > 1 and not _in_task_order(order, lo, hi, pr, cr, ours):
            part = sorted(order_arr[lo:hi].tolist(),
                          key=lambda k: (-scan.priority[k], scan.creation[k], ours[k].uid))
            for i in range(hi - lo):
                order[lo + i] = part[i]
    cdef list pods = [None] * t_n, task_keys = [None] * t_n
    for i in range(t_n):
        pods[i] = ours[order[i]]
        task_keys[i] = keys[order[i]]
    return TaskOrder(order_arr, pods, task_keys, first_arr, [names[j] for j in by_name])


def task_columns(list pods, const signed char[::1] status, const unsigned char[::1] plain,
                 const long long[::1] task_shape, const long long[::1] row_of_shape, tuple label_keys=None,
                 dict extra_keys=None):
    """Each pending task's class (0 for the others) and each class's first task: a task
    without node constraints or tolerations (`plain`) is classed by its request row alone.
    With `label_keys` (the label keys inter-pod selectors read), every task is also classed by
    its rules, namespace and those of its labels. `extra_keys` (task -> key) tells apart tasks
    whose claims differ (runtime.engine.rules.volumes: the volumes they are bound to, or the shape of
    the volumes they need)."""
    cdef Py_ssize_t t_n = len(pods), t, row, cid
    class_arr = np.zeros(t_n, dtype=np.int64)
    plain_class_arr = np.full(row_of_shape.shape[0], -1, dtype=np.int64)
    cdef long long[::1] task_class = class_arr, plain_class = plain_class_arr
    cdef dict keyed = {}
    cdef list heads = []
    cdef object pod, selector, found, key
    cdef dict labels
    for t in range(t_n):
        if status[t] != PENDING:
            continue
        row = row_of_shape[task_shape[t]]
        if plain[t] and label_keys is None:
            cid = plain_class[row]
            if cid < 0:
                cid = plain_class[row] = len(heads)
                heads.append(t)
        else:
            pod = pods[t]
            selector = get_slot(pod, M_SELECTOR)
            key = (row, tuple(sorted(selector.items())) if selector else (), get_slot(pod, M_REQUIRED),
                   get_slot(pod, M_PREFERRED), get_slot(pod, M_TOLERATIONS))
            if label_keys is not None:
                labels = get_slot(pod, M_LABELS)
                key += (get_slot(pod, M_RULES), get_slot(pod, M_NAMESPACE),
                        tuple([(k, labels[k]) for k in label_keys if k in labels]))
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


def node_usage(const long long[::1] placed_node, const long long[::1] placed_shape,
               const unsigned char[::1] placed_gone, const unsigned char[::1] placed_mine,
               const long long[:, ::1] shapes, long long[:, ::1] used, long long[:, ::1] releasing):
    """Adds each placed pod's request to its node's used (and releasing, when it leaves);
    returns how many of them are other schedulers' pods on known nodes."""
    cdef Py_ssize_t i, r, n, s, r_n = shapes.shape[1]
    cdef Py_ssize_t foreign = 0
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


cdef PyMemberDef *J_INDEX = slot_member(JobInfo, "index")
cdef PyMemberDef *J_KEY = slot_member(JobInfo, "key")
cdef PyMemberDef *J_PODGROUP = slot_member(JobInfo, "podgroup")
cdef PyMemberDef *J_IMPLICIT = slot_member(JobInfo, "implicit")
cdef PyMemberDef *J_QUEUE = slot_member(JobInfo, "queue")
cdef PyMemberDef *J_QUEUE_NAME = slot_member(JobInfo, "queue_name")
cdef PyMemberDef *J_MIN_MEMBER = slot_member(JobInfo, "min_member")
cdef PyMemberDef *J_MIN_TASK = slot_member(JobInfo, "min_task_member")
cdef PyMemberDef *J_MIN_RES = slot_member(JobInfo, "min_resources")
cdef PyMemberDef *J_PRIORITY = slot_member(JobInfo, "priority")
cdef PyMemberDef *J_CREATION = slot_member(JobInfo, "creation")
cdef PyMemberDef *J_UID = slot_member(JobInfo, "uid")
cdef PyMemberDef *J_PHASE = slot_member(JobInfo, "phase")
cdef PyMemberDef *J_TASKS = slot_member(JobInfo, "tasks")
cdef PyMemberDef *J_PROBLEM = slot_member(JobInfo, "problem")


def build_jobs(dict podgroups, dict priority_classes, default_priority, list job_names, list pods,
               const long long[::1] job_first, const long long[::1] task_priority, dict queue_index,
               list leaf, dict index, Py_ssize_t r, str default_queue):
    """Jobs from the grouped tasks (reference.build_jobs, step for step)."""
    cdef Py_ssize_t j, lo, hi, j_n = len(job_names)
    cdef long long q
    cdef list jobs = []
    cdef object key, head, group, problem, queue_name, min_member, priority, min_res, phase, creation, uid
    cdef object min_task, head_group, pclass, job
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
            queue_name = group.queue
            min_member = group.min_member
            pclass = group.priority_class
            priority = priority_classes.get(pclass, default_priority) if pclass else task_priority[lo]
            min_res = None
            if group.min_resources:
                min_res = np.zeros(r, dtype=np.int64)
                for res, amount in group.min_resources.items():
                    if res in index:
                        min_res[index[res]] = amount
            phase, creation, uid, min_task = group.phase, group.creation, group.uid, dict(group.min_task_member)
        else:
            queue_name = (<dict> get_slot(head, M_ANNOTATIONS)).get(QUEUE_ANNOTATION) or default_queue
            min_member, priority, min_res = 1, task_priority[lo], None
            # An implicit group of a placed pod runs; a waiting one starts Pending.
            phase = PG_RUNNING if get_slot(head, M_NODE) else PG_PENDING
            creation, uid, min_task = get_slot(head, M_CREATION), get_slot(head, M_UID), {}
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
