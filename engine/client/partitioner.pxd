# The C types Cython gives partitioner.py when it compiles it (setup.py): murmur2's words as
# 64-bit unsigned integers (a product of two 32-bit words fits; every step masks back to 32
# bits, as the Python does), so a key's hash is a loop in C, not in Python ints.

cimport cython

cdef unsigned long long _M, _SEED, _MASK

@cython.locals(
    length=Py_ssize_t, whole=Py_ssize_t, i=Py_ssize_t, rest=Py_ssize_t,
    h="unsigned long long", k="unsigned long long",
)
cpdef long long murmur2(bytes data)
