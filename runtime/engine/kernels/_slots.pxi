# Reading and writing the fields of slots dataclasses (runtime.cluster.model.Pod, runtime.cluster.decisions.Binding)
# from a kernel (textually included). A slots field is a member at a fixed offset of the
# instance; CPython's member API reads it without the attribute lookup (type MRO walk, then
# descriptor call) that `obj.field` costs from C, which over 20,000 pods a cycle is most of
# the snapshot's pass. Only for classes declared with `slots=True` (slot_member checks).

from cpython.object cimport PyObject, PyTypeObject

cdef extern from "Python.h":
    ctypedef struct PyMemberDef:
        const char *name
        int type
        Py_ssize_t offset
    ctypedef struct PyMemberDescrObject:
        PyMemberDef *d_member
    object PyMember_GetOne(const char *obj_addr, PyMemberDef *m)
    int PyMember_SetOne(char *obj_addr, PyMemberDef *m, object value) except -1

import types as _types


cdef PyMemberDef *slot_member(type cls, str name) except NULL:
    """The member behind field `name` of the slots class `cls`."""
    descr = None
    for klass in cls.__mro__:
        if name in klass.__dict__:
            descr = klass.__dict__[name]
            break
    if type(descr) is not _types.MemberDescriptorType:
        raise TypeError(f"{cls.__name__}.{name} is not a slot (declare the dataclass with slots=True)")
    return (<PyMemberDescrObject *> <PyObject *> descr).d_member


cdef inline object get_slot(object obj, PyMemberDef *m):
    return PyMember_GetOne(<const char *> <PyObject *> obj, m)


cdef inline void set_slot(object obj, PyMemberDef *m, object value) except *:
    PyMember_SetOne(<char *> <PyObject *> obj, m, value)


cdef tuple _NO_ARGS = ()


cdef inline object new_instance(type cls):
    """An instance of `cls` with its slots unset (its __new__, without __init__): fill every
    field with set_slot."""
    return (<PyTypeObject *> cls).tp_new(cls, <PyObject *> _NO_ARGS, NULL)
