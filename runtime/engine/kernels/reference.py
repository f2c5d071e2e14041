"""Pure-Python reference of the kernels (same signatures as the compiled ones).

Only the parity tests and the benchmark's baseline use it (`POLICYDSL_PURE_PYTHON=1`). Plain
loops over the arrays, written to be obviously right rather than fast.

Score parameters (`params`, float64), folded from the Plan once per session:
    [0] binpack weight   [1] least-requested weight   [2] most-requested weight
    [3] balanced-allocation weight
    [4 : 4+R]     binpack per-resource weights
    [4+R : 4+2R]  nodeorder per-resource weights (cpu and memory by default)
"""

from __future__ import annotations

import math

import numpy as np

from runtime.cluster.decisions import Binding, PodGroupStatus
from runtime.engine.kernels.records import JobInfo, PodScan, TaskColumns, TaskOrder
from runtime.cluster.model import PG_COMPLETED, PG_INQUEUE, PG_PENDING, PG_RUNNING, QUEUE_ANNOTATION, Pod, scheduled_condition

IDLE = 2
FUTURE = 1
NO_FIT = 0
# Placement keys: idle-fitting nodes rank above future-fitting ones whatever their score.
IDLE_BONUS = 2e12
FUTURE_BONUS = 1e12
NEG_INF = -math.inf


def fit_state(alloc, used, releasing, pipelined, req, n: int) -> int:
    r_n = len(req)
    idle = True
    for r in range(r_n):
        q = req[r]
        if q == 0:
            continue
        free = alloc[n, r] - used[n, r]
        # Reservations (pipelined) beyond what releasing pods will free hold idle room too.
        held = pipelined[n, r] - releasing[n, r]
        if q > (free - held if held > 0 else free):
            idle = False
            if q > free + releasing[n, r] - pipelined[n, r]:
                return NO_FIT
    return IDLE if idle else FUTURE


def fit_states(alloc, used, releasing, pipelined, req, mask, out) -> None:
    for n in range(alloc.shape[0]):
        out[n] = fit_state(alloc, used, releasing, pipelined, req, n) if mask[n] else NO_FIT


def score_node(alloc, used, req, params, n: int) -> float:
    r_n = len(req)
    total = 0.0
    if params[0] > 0:
        s = 0.0
        ws = 0.0
        over = False
        for r in range(r_n):
            w = params[4 + r]
            if w <= 0 or req[r] == 0:
                continue
            if alloc[n, r] == 0:
                ws += w        # a resource the node does not offer scores 0, its weight still counts (Volcano)
                continue
            after = used[n, r] + req[r]
            if after > alloc[n, r]:
                over = True
                break
            s += after * w / alloc[n, r]
            ws += w
        if not over and ws > 0:
            total += s / ws * 100.0 * params[0]
    if params[1] > 0 or params[2] > 0 or params[3] > 0:
        least = most = ws = 0.0
        fr_sum = fr_sq = 0.0
        count = 0
        for r in range(r_n):
            w = params[4 + r_n + r]
            if w <= 0 or alloc[n, r] == 0:
                continue
            after = used[n, r] + req[r]
            cap = alloc[n, r]
            if after <= cap:
                least += (cap - after) * 100.0 / cap * w
                most += after * 100.0 / cap * w
            f = after / cap
            if f > 1.0:
                f = 1.0
            fr_sum += f
            fr_sq += f * f
            count += 1
            ws += w
        if ws > 0:
            total += params[1] * least / ws + params[2] * most / ws
        if count > 0:
            mean = fr_sum / count
            var = fr_sq / count - mean * mean
            if var < 0.0:
                var = 0.0
            total += params[3] * (1.0 - math.sqrt(var)) * 100.0
    return total


def score_nodes(alloc, used, req, params, static, out) -> None:
    for n in range(alloc.shape[0]):
        out[n] = score_node(alloc, used, req, params, n) + static[n]


MASK_PASS = 1           # node mask codes (runtime.engine.session)
MASK_RELEASING = 2


def _key(alloc, used, releasing, pipelined, req, mask, static, params, n: int) -> float:
    if not mask[n] & MASK_PASS:
        return NEG_INF
    state = fit_state(alloc, used, releasing, pipelined, req, n)
    if state == NO_FIT:
        return NEG_INF
    if state == IDLE and mask[n] & MASK_RELEASING:
        state = FUTURE      # what the rule needs is held by pods that are leaving: a future fit
    score = score_node(alloc, used, req, params, n) + static[n]
    return score + (IDLE_BONUS if state == IDLE else FUTURE_BONUS)


def place_batch(alloc, used, releasing, pipelined, req, mask, static, params, k: int, out_nodes, out_kind) -> int:
    """Place up to k identical tasks one by one on the best node (idle before future fit, then
    score, then lowest index). Updates used (allocated) or pipelined in place. Stops at the
    first task that fits nowhere; returns how many were placed."""
    tree = PlacementTree(alloc, used, releasing, pipelined, req, mask, static, params)
    tree.build()
    placed = tree.place(k)
    out_nodes[:placed] = tree.out_nodes[:placed]
    out_kind[:placed] = tree.out_kinds[:placed]
    return placed


def dominant_shares(allocated, total, out) -> None:
    for j in range(allocated.shape[0]):
        best = 0.0
        for r in range(allocated.shape[1]):
            if total[r] > 0:
                s = allocated[j, r] / total[r]
                if s > best:
                    best = s
        out[j] = best


def water_fill(total, weights, request, cap, guarantee, out) -> int:
    """Deserved shares of sibling queues (Volcano's proportion loop, per-resource clamp).

    Each round every unmet queue gets remaining × weight / Σ unmet weights, clamped to its cap
    and its request, raised to its guarantee; a queue whose request is covered is met. Stops
    when nothing remains or nothing changed. Returns the number of rounds."""
    q_n, r_n = request.shape
    met = [False] * q_n
    for q in range(q_n):
        for r in range(r_n):
            out[q, r] = 0.0
    rounds = 0
    while True:
        rounds += 1
        remaining = [0.0] * r_n
        for r in range(r_n):
            used = 0.0
            for q in range(q_n):
                used += out[q, r]
            remaining[r] = max(0.0, total[r] - used)
        wsum = 0.0
        for q in range(q_n):
            if not met[q]:
                wsum += weights[q]
        if wsum <= 0 or all(x <= 0 for x in remaining) and rounds > 1:
            break
        changed = False
        for q in range(q_n):
            if met[q]:
                continue
            covered = True
            for r in range(r_n):
                old = out[q, r]
                v = old + remaining[r] * weights[q] / wsum
                v = min(v, cap[q, r], request[q, r])
                v = max(v, guarantee[q, r])
                if v != old:
                    changed = True
                out[q, r] = v
                if request[q, r] > v:
                    covered = False
            if covered:
                met[q] = True
                changed = True
        if not changed or rounds > 1000:
            break
    return rounds


class PlacementTree:
    """Keys of one task class over all nodes in a max segment tree, kept between uses, bound to
    the session's node arrays and the class's request, mask and static scores: `build` scores
    every node, `refresh` re-keys the nodes changed since, `place` takes the best node (ties to
    the lowest index) and re-keys only it, into `out_nodes` / `out_kinds`. The compiled
    PlacementTree, line for line."""

    def __init__(self, alloc, used, releasing, pipelined, req, mask, static, params):
        self.alloc, self.used, self.releasing, self.pipelined = alloc, used, releasing, pipelined
        self.req, self.mask, self.static, self.params = req, mask, static, params
        self.n_nodes = alloc.shape[0]
        size = 1
        while size < self.n_nodes:
            size *= 2
        self.size = size
        self.key = [NEG_INF] * (2 * size)
        self.idx = [-1] * (2 * size)
        self.out_nodes = np.empty(16, dtype=np.int64)
        self.out_kinds = np.empty(16, dtype=np.int8)

    def _pull(self, i: int) -> None:
        key, idx = self.key, self.idx
        a, b = 2 * i, 2 * i + 1
        if key[b] > key[a]:
            key[i] = key[b]
            idx[i] = idx[b]
        else:
            key[i] = key[a]
            idx[i] = idx[a]

    def _rekey(self, n: int) -> None:
        i = self.size + n
        self.key[i] = _key(self.alloc, self.used, self.releasing, self.pipelined, self.req, self.mask, self.static,
                           self.params, n)
        i //= 2
        while i >= 1:
            self._pull(i)
            i //= 2

    def build(self) -> None:
        size = self.size
        alloc, used, releasing, pipelined = self.alloc, self.used, self.releasing, self.pipelined
        req, mask, static, params = self.req, self.mask, self.static, self.params
        for n in range(self.n_nodes):
            self.key[size + n] = _key(alloc, used, releasing, pipelined, req, mask, static, params, n)
            self.idx[size + n] = n
        for i in range(size - 1, 0, -1):
            self._pull(i)

    def refresh(self, nodes) -> None:
        done = set()
        for n in nodes:
            if n in done:
                continue
            done.add(n)
            self._rekey(int(n))

    def place(self, k: int) -> int:
        if len(self.out_nodes) < k:
            self.out_nodes = np.empty(2 * k, dtype=np.int64)
            self.out_kinds = np.empty(2 * k, dtype=np.int8)
        placed = 0
        req = self.req
        r_n = len(req)
        while placed < k:
            best_key = self.key[1]
            if best_key == NEG_INF:
                break
            best = self.idx[1]
            idle = best_key >= (IDLE_BONUS + FUTURE_BONUS) / 2
            for r in range(r_n):
                if idle:
                    self.used[best, r] += req[r]
                else:
                    self.pipelined[best, r] += req[r]
            self.out_nodes[placed] = best
            self.out_kinds[placed] = IDLE if idle else FUTURE
            placed += 1
            self._rekey(best)
        return placed


# --- one row at a time -----------------------------------------------------------------------

UNLIMITED = (2**63 - 1) // 4


class RowShare:
    def __init__(self, allocated, total):
        self.allocated, self.total = allocated, total

    def of(self, row: int) -> float:
        best = 0.0
        for r in range(self.allocated.shape[1]):
            if self.total[r] > 0:
                s = self.allocated[row, r] / self.total[r]
                if s > best:
                    best = s
        return best


class QueueShare:
    def __init__(self, allocated, deserved, columns):
        self.allocated, self.deserved, self.columns = allocated, deserved, columns

    def of(self, row: int) -> float:
        best = 0.0
        for r in self.columns:
            if self.deserved[row, r] > 0:
                s = self.allocated[row, r] / self.deserved[row, r]
                if s > best:
                    best = s
            elif self.allocated[row, r] > 0 and best < 1.0:
                best = 1.0
        return best


class AtLimit:
    def __init__(self, allocated, limit, columns, chain_ptr, chains):
        self.allocated, self.limit, self.columns = allocated, limit, columns
        self.chain_ptr, self.chains = chain_ptr, chains

    def row(self, row: int) -> bool:
        for r in self.columns:
            if self.limit[row, r] > self.allocated[row, r]:
                return False
        return True

    def chain(self, q: int) -> bool:
        for k in range(self.chain_ptr[q], self.chain_ptr[q + 1]):
            if self.row(self.chains[k]):
                return True
        return False


class CountWithin:
    def __init__(self, limit, allocated, columns):
        self.limit, self.allocated, self.columns = limit, allocated, columns

    def count(self, row: int, request, count: int) -> tuple[int, int]:
        allowed, binding = count, -1
        for r in self.columns:
            if request[r] == 0 or self.limit[row, r] >= UNLIMITED:
                continue
            room = self.limit[row, r] - self.allocated[row, r]
            n = room // request[r] if room >= 0 else 0
            if n < allowed:
                allowed = max(n, 0)
                binding = int(r)
        return int(allowed), binding


# --- the session's ledger ---------------------------------------------------------------------

PENDING, ALLOCATED, PIPELINED, RELEASING = 0, 1, 2, 4


class Ledger:
    """The compiled Ledger (runtime/engine/kernels/ledger.pyx), method for method."""

    def __init__(self, request, task_job, task_class, zero, status, task_node, used, pipelined, releasing,
                 job_first, job_allocated, job_ready, job_pipelined, job_pending, job_queue, queue_allocated,
                 chain_ptr, chains):
        self.request = request
        self.task_job = task_job
        self.task_class = task_class
        self.zero = zero
        self.status = status
        self.task_node = task_node
        self.used = used
        self.pipelined = pipelined
        self.releasing = releasing
        self.job_first = job_first
        self.job_allocated = job_allocated
        self.job_ready = job_ready
        self.job_pipelined = job_pipelined
        self.job_pending = job_pending
        self.job_queue = job_queue
        self.queue_allocated = queue_allocated
        self.chain_ptr = chain_ptr
        self.chains = chains
        self.held = [1] * request.shape[1]
        self.log: list[int] = []

    @property
    def log_n(self) -> int:
        return len(self.log)

    def set_held(self, held) -> None:
        self.held = [int(h) for h in held]

    def log_since(self, seen: int) -> list[int]:
        return self.log[seen:]

    def _account(self, t: int, sign: int, ready: bool) -> None:
        j = self.task_job[t]
        if not ready:
            self.job_pipelined[j] += sign
            return
        self.job_ready[j] += sign
        r_n = self.request.shape[1]
        for r in range(r_n):
            self.job_allocated[j, r] += sign * self.request[t, r]
        q = self.job_queue[j]
        if q < 0:
            return
        for k in range(self.chain_ptr[q], self.chain_ptr[q + 1]):
            c = self.chains[k]
            for r in range(r_n):
                self.queue_allocated[c, r] += sign * self.request[t, r]
        for r in range(r_n):
            self.queue_allocated[0, r] += sign * self.request[t, r]

    def _hold(self, arr, node: int, t: int, sign: int) -> None:
        for r in range(self.request.shape[1]):
            arr[node, r] += sign * self.request[t, r] * self.held[r]

    def placed(self, tasks, nodes, kinds, n: int) -> None:
        for i in range(n):
            t = tasks[i]
            idle = kinds[i] == IDLE
            self.status[t] = ALLOCATED if idle else PIPELINED
            self.task_node[t] = nodes[i]
            self.job_pending[self.task_job[t]] -= 1
            self._account(t, 1, idle)
            self.log.append(int(nodes[i]))

    def occupy(self, t: int, node: int, status: int) -> None:
        self._hold(self.used if status == ALLOCATED else self.pipelined, node, t, 1)
        self.status[t] = status
        self.task_node[t] = node
        self.job_pending[self.task_job[t]] -= 1
        self._account(t, 1, status == ALLOCATED)
        self.log.append(int(node))

    def unplace(self, tasks) -> None:
        for t in tasks:
            node = self.task_node[t]
            ready = self.status[t] == ALLOCATED
            self._hold(self.used if ready else self.pipelined, node, t, -1)
            self._account(t, -1, ready)
            self.status[t] = PENDING
            self.task_node[t] = -1
            self.job_pending[self.task_job[t]] += 1
            self.log.append(int(node))

    def pipeline(self, tasks) -> int:
        changed = 0
        for t in tasks:
            if self.status[t] != ALLOCATED:
                continue
            node = self.task_node[t]
            self._hold(self.used, node, t, -1)
            self._hold(self.pipelined, node, t, 1)
            self._account(t, -1, True)
            self._account(t, 1, False)
            self.status[t] = PIPELINED
            self.log.append(int(node))
            changed += 1
        return changed

    def evict(self, t: int) -> int:
        prior = int(self.status[t])
        node = self.task_node[t]
        self._hold(self.releasing, node, t, 1)
        self.status[t] = RELEASING
        self._account(t, -1, True)
        self.log.append(int(node))
        return prior

    def unevict(self, t: int, prior: int) -> None:
        node = self.task_node[t]
        self._hold(self.releasing, node, t, -1)
        self.status[t] = prior
        self._account(t, 1, True)
        self.log.append(int(node))

    def pending_runs(self, j: int, skip_zero: bool) -> list[list[int]]:
        out: list[list[int]] = []
        run = None
        last = -1
        for t in range(self.job_first[j], self.job_first[j + 1]):
            if self.status[t] != PENDING or (skip_zero and self.zero[t]):
                continue
            if run is not None and self.task_class[t] == last:
                run.append(t)
            else:
                run = [t]
                out.append(run)
                last = self.task_class[t]
        return out


# --- the snapshot's passes over the pods (scan.pyx) -------------------------------------------

SUCCEEDED = 5
BOUND = 3
HELD = 6


def scan_pods(pods, scheduler_name, priority_classes, default_priority, node_pos, fold=False):
    """One pass over the state's pods: distinct request maps, the pods holding room on nodes,
    our scheduler's pods with their job, priority, creation, status and node. With `fold`, our
    settled lone pods are counted per queue and request map instead (PodScan.settled)."""
    shape_index = {}
    job_index = {}
    settled = {}
    shapes, ours, keys, job_names = [], [], [], []
    placed_node, placed_shape, placed_gone, placed_mine = [], [], [], []
    shape, job, priority, creation, status, node_of, plain = [], [], [], [], [], [], []
    rule_pods = []
    volume_pods = []
    volume_tasks = []
    last_items, last_sid, last_job_key, last_j = None, -1, None, -1
    for key, pod in pods.items():
        if not isinstance(pod, Pod):
            raise TypeError(f"state.pods[{key!r}] is a {type(pod).__name__}, not a Pod")
        requests = pod.requests
        items = tuple(requests.items())
        # Pods of a job come in a row with equal requests: the last pod's shape, unhashed.
        if items == last_items:
            sid = last_sid
        else:
            sid = shape_index.get(items)
            if sid is None:
                sid = len(shapes)
                shape_index[items] = sid
                shapes.append(requests)
            last_items, last_sid = items, sid
        phase = pod.phase
        mine = pod.scheduler_name == scheduler_name
        node = pod.node_name
        where = -1
        gone = False
        if pod.rules is not None and phase != "Succeeded" and phase != "Failed" and (node or mine):
            rule_pods.append(pod)
        if pod.volumes is not None and phase != "Succeeded" and phase != "Failed" and (node or mine):
            volume_pods.append(pod)
        if node:
            where = node_pos.get(node, -1)
            if where < 0 and phase != "Succeeded" and phase != "Failed":
                # Bound to a node that is gone (deleted; the pod garbage collector has not
                # removed the pod yet): it holds room nowhere and counts in no queue.
                sid = shape_index.get(())
                if sid is None:
                    sid = len(shapes)
                    shape_index[()] = sid
                    shapes.append({})
            gone = bool(pod.releasing)
            if phase != "Succeeded" and phase != "Failed":
                placed_node.append(where)
                placed_shape.append(sid)
                placed_gone.append(gone)
                placed_mine.append(mine)
        if mine and phase != "Failed":
            if fold and not pod.group and (phase == "Succeeded" or (node and not gone)):
                if phase != "Succeeded":
                    queue_key = (pod.annotations.get(QUEUE_ANNOTATION), sid)
                    settled[queue_key] = settled.get(queue_key, 0) + 1
                continue
            prio = pod.priority
            if prio is None:
                pclass = pod.priority_class
                prio = priority_classes.get(pclass, default_priority) if pclass is not None else default_priority
            namespace = pod.namespace
            name = pod.group
            if not name:
                name = pod.name
            job_key = (namespace, name)
            if job_key == last_job_key:
                j = last_j
            else:
                j = job_index.get(job_key)
                if j is None:
                    j = len(job_names)
                    job_index[job_key] = j
                    job_names.append(f"{namespace}/{name}")
                last_job_key, last_j = job_key, j
            ours.append(pod)
            keys.append(key)
            shape.append(sid)
            job.append(j)
            priority.append(prio)
            creation.append(pod.creation)
            if phase == "Succeeded":
                status.append(SUCCEEDED)
                node_of.append(-1)
                plain.append(False)
            elif node:
                status.append(RELEASING if gone else BOUND)
                node_of.append(where)
                plain.append(False)
            elif phase == "Running":
                # Running without a node (as Volcano counts it: a running task, ready, in its
                # queue's allocation), holding room on no node.
                status.append(BOUND)
                node_of.append(-1)
                plain.append(False)
            else:
                status.append(HELD if pod.scheduling_gates or pod.unsupported or pod.held_back is not None else PENDING)
                node_of.append(-1)
                plain.append(not (pod.node_selector or pod.required_terms or pod.preferred_terms or pod.tolerations
                                  or pod.rules or pod.volumes is not None))
                if pod.volumes is not None:
                    volume_tasks.append(len(status) - 1)
    return PodScan(shapes, np.array(placed_node, dtype=np.int64), np.array(placed_shape, dtype=np.int64),
                   np.array(placed_gone, dtype=np.uint8), np.array(placed_mine, dtype=np.uint8), ours, keys,
                   np.array(shape, dtype=np.int64), np.array(job, dtype=np.int64),
                   np.array(priority, dtype=np.int64), np.array(creation, dtype=np.float64),
                   np.array(status, dtype=np.int8), np.array(node_of, dtype=np.int64), np.array(plain, dtype=np.uint8),
                   job_names, settled, rule_pods, volume_pods, volume_tasks)


def _in_task_order(order, lo, hi, priority, creation, ours) -> bool:
    for i in range(lo + 1, hi):
        a = order[i - 1]
        b = order[i]
        if priority[a] != priority[b]:
            if priority[a] < priority[b]:
                return False
            continue
        if creation[a] != creation[b]:
            if creation[a] > creation[b]:
                return False
            continue
        if ours[a].uid > ours[b].uid:
            return False
    return True


def group_tasks(scan):
    """Our pods as tasks: jobs by name (a counting sort), each job's tasks by priority
    (descending), creation, uid."""
    names, ours, keys = scan.job_names, scan.ours, scan.keys
    job, priority, creation = scan.job.tolist(), scan.priority.tolist(), scan.creation.tolist()
    j_n, t_n = len(names), len(ours)
    by_name = sorted(range(j_n), key=names.__getitem__)
    rank = [0] * j_n
    for r in range(j_n):
        rank[by_name[r]] = r
    first = [0] * (j_n + 1)
    for i in range(t_n):
        first[rank[job[i]] + 1] += 1
    for r in range(j_n):
        first[r + 1] += first[r]
    fill = first[:j_n]
    order = [0] * t_n
    for i in range(t_n):
        r = rank[job[i]]
        order[fill[r]] = i
        fill[r] += 1
    for r in range(j_n):
        lo, hi = first[r], first[r + 1]
        if hi - lo > 1 and not _in_task_order(order, lo, hi, priority, creation, ours):
            order[lo:hi] = sorted(order[lo:hi], key=lambda k: (-priority[k], creation[k], ours[k].uid))
    pods = [None] * t_n
    task_keys = [None] * t_n
    for i in range(t_n):
        pods[i] = ours[order[i]]
        task_keys[i] = keys[order[i]]
    return TaskOrder(np.array(order, dtype=np.int64), pods, task_keys, np.array(first, dtype=np.int64),
                     [names[j] for j in by_name])


def build_jobs(podgroups, priority_classes, default_priority, job_names, pods, job_first, task_priority,
               queue_index, leaf, index, r, default_queue):
    """Jobs from the grouped tasks (job j's tasks are job_first[j]:job_first[j+1]): a PodGroup's
    queue, minMember, priority, minResources (a row over `index`'s resources), phase; a pod
    without a group is its own job, in the queue its QUEUE_ANNOTATION names, else `default_queue`. `leaf[q]`: queue q has no children."""
    jobs = []
    first = job_first.tolist()
    all_tasks = np.arange(first[-1], dtype=np.int64)
    for j, key in enumerate(job_names):
        lo, hi = first[j], first[j + 1]
        head = pods[lo]
        group = podgroups.get(key) if head.group else None
        problem = None
        if head.group and group is None:
            problem = f"PodGroup {key} does not exist"
        if group is not None:
            queue_name = group.queue
            min_member = group.min_member
            priority = (priority_classes.get(group.priority_class, default_priority)
                        if group.priority_class else int(task_priority[lo]))
            min_res = None
            if group.min_resources:
                min_res = np.zeros(r, dtype=np.int64)
                for res, amount in group.min_resources.items():
                    if res in index:
                        min_res[index[res]] = amount
            phase, creation, uid, min_task = group.phase, group.creation, group.uid, dict(group.min_task_member)
        else:
            queue_name = head.annotations.get(QUEUE_ANNOTATION) or default_queue
            min_member, priority, min_res = 1, int(task_priority[lo]), None
            # An implicit group of a placed pod runs; a waiting one starts Pending like the
            # PodGroup Volcano's controller would create for it.
            phase = PG_RUNNING if head.node_name else PG_PENDING
            creation, uid, min_task = head.creation, head.uid, {}
        q = queue_index.get(queue_name, -1)
        if q < 0 and problem is None:
            problem = f"queue {queue_name} does not exist"
        elif q >= 0 and not leaf[q] and problem is None:
            problem = f"queue {queue_name} is not a leaf queue"
        jobs.append(JobInfo(j, key, group, group is None, q, queue_name, min_member, min_task, min_res, priority,
                            creation, uid, phase, all_tasks[lo:hi], problem))
    return jobs


def task_columns(pods, status, plain, task_shape, row_of_shape, label_keys=None, extra_keys=None):
    """Each pending task's class (0 for the others) and each class's first task: a task
    without node constraints or tolerations (`plain`) is classed by its request row alone.
    With `label_keys` (the label keys inter-pod selectors read), every task is also classed by
    its rules, namespace and those of its labels."""
    t_n = len(pods)
    task_class = [0] * t_n
    plain_class = [-1] * len(row_of_shape)
    keyed = {}
    heads = []
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
            selector = pod.node_selector
            key = (row, tuple(sorted(selector.items())) if selector else (), pod.required_terms, pod.preferred_terms,
                   pod.tolerations)
            if label_keys is not None:
                labels = pod.labels
                key += (pod.rules, pod.namespace, tuple((k, labels[k]) for k in label_keys if k in labels))
            if extra_keys is not None:
                key += (extra_keys.get(t),)
            cid = keyed.get(key)
            if cid is None:
                cid = len(heads)
                keyed[key] = cid
                heads.append(t)
        task_class[t] = cid
    return TaskColumns(np.array(task_class, dtype=np.int64), heads)


def node_usage(placed_node, placed_shape, placed_gone, placed_mine, shapes, used, releasing) -> int:
    """Adds each placed pod's request to its node's used (and releasing, when it leaves);
    returns how many of them are other schedulers' pods on known nodes."""
    r_n = shapes.shape[1]
    foreign = 0
    for i in range(len(placed_node)):
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


# --- the cycle's decisions (collect.pyx) ------------------------------------------------------

def placements(before, status, task_node, task_keys, node_names, task_devices):
    """(bindings, pipelined): tasks pending in the snapshot that the cycle allocated or
    pipelined, in task order."""
    bindings = []
    pipelined = {}
    for t in range(len(status)):
        if before[t] != PENDING:
            continue
        if status[t] == ALLOCATED:
            devices = task_devices.get(t) if task_devices else None
            bindings.append(Binding(task_keys[t], node_names[task_node[t]], {} if devices is None else devices))
        elif status[t] == PIPELINED:
            pipelined[task_keys[t]] = node_names[task_node[t]]
    return bindings, pipelined


def podgroup_statuses(jobs, job_phase, ready, status, task_job, waiting):
    """The status of each explicit PodGroup: Completed when all its tasks succeeded, Running
    with minMember ready (Scheduled condition), back to Inqueue when a running gang fell below
    it; a Pending or Inqueue one takes its condition from `waiting(j, pending, size)`."""
    j_n = len(jobs)
    pending = [0] * j_n
    succeeded = [0] * j_n
    for t in range(len(status)):
        if status[t] == PENDING:
            pending[task_job[t]] += 1
        elif status[t] == SUCCEEDED:
            succeeded[task_job[t]] += 1
    out = []
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
            conditions = (scheduled_condition(ready[j], size),)
        out.append(PodGroupStatus(job.key, phase, conditions))
    return out
