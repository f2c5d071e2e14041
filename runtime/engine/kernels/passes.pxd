# C declarations of passes.py when compiled (Cython's pure-Python mode: this file augments the
# module; the interpreted module never reads it). The CPython API behind the slot accessors,
# and the C type of each field handle (a PyMemberDef of a slots dataclass).

from cpython.dict cimport PyDict_Next
from cpython.object cimport PyObject, PyTypeObject
from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_New, PyTuple_SET_ITEM

cdef extern from "Python.h":
    ctypedef struct PyMemberDef:
        const char *name
        int type
        Py_ssize_t offset
    ctypedef struct PyMemberDescrObject:
        PyMemberDef *d_member
    object PyMember_GetOne(const char *obj_addr, PyMemberDef *m)
    int PyMember_SetOne(char *obj_addr, PyMemberDef *m, object value) except -1

ctypedef PyMemberDef *Field

cdef Field M_REQUESTS, M_PHASE, M_SCHEDULER, M_NODE, M_RELEASING, M_PRIORITY, M_PRIORITY_CLASS, M_NAMESPACE
cdef Field M_NAME, M_GROUP, M_CREATION, M_UID, M_SELECTOR, M_REQUIRED, M_PREFERRED, M_TOLERATIONS
cdef Field M_ANNOTATIONS, M_RULES, M_GATES, M_UNSUPPORTED, M_HELD, M_LABELS, M_VOLUMES, M_CLAIMS
cdef Field J_INDEX, J_KEY, J_PODGROUP, J_IMPLICIT, J_QUEUE, J_QUEUE_NAME, J_MIN_MEMBER, J_MIN_TASK, J_MIN_RES
cdef Field J_PRIORITY, J_CREATION, J_UID, J_PHASE, J_TASKS, J_PROBLEM
cdef Field B_POD, B_NODE, B_DEVICES, S_NAME, S_PHASE, S_CONDITIONS, C_TYPE, C_STATUS, C_REASON, C_MESSAGE
