/* tmaguard._speedups: tmaguard.declared() and tmaguard.torch.watch() at C speed. A CPython extension on the stable
 * ABI (Python 3.8 and later, one build for all): it reads each tensor's data pointer, shape, strides and element size
 * through the tensor's own methods, as the Python helper does, and hands the whole block to the preloaded library in
 * one call (tmaguard_declare_tensors, include/tmaguard/declare.h); a block's exit is one call too
 * (tmaguard_end_declaration_to). It is built with the library and installed beside it (LIBDIR/tmaguard/python/),
 * and loaded by python/tmaguard/_declare.py only in a process the library is preloaded into, which passes it the two
 * functions' addresses (bind): no symbol lookup of its own, nothing linked but libc.
 *
 *   bind(declare_address, end_address, fallback)   once; fallback(obj) -> (data, shape, strides, element_size) reads
 *                                                   what has no data_ptr() (array interfaces, DLPack)
 *   declare(dict) -> depth                          the values of a {name: tensor} dict (None skipped); an object
 *                                                   neither kind can read raises, and nothing is declared
 *   declare_call(names, keywords, args, kwargs) -> depth    (keywords: a frozenset)
 *                                                   a call's tensor arguments: args[i] under names[i], kwargs[k] when
 *                                                   k is in keywords; what is no PyTorch-like tensor, or whose
 *                                                   metadata cannot be read (a fake or meta tensor), is skipped
 *   call_declared(fn, names, keywords, args, kwargs)
 *                                                   fn(*args, **kwargs) with declare_call's tensors declared for it
 *   end(depth)                                      the declarations return to that depth
 */
#define Py_LIMITED_API 0x03080000
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "tmaguard/declare.h"

typedef int (*declare_fn)(const tmaguard_tensor*, int, int*);
typedef void (*end_fn)(int);

static declare_fn g_declare;
static end_fn g_end;
static PyObject* g_fallback;
static PyObject *s_data_ptr, *s_shape, *s_stride, *s_element_size, *s_dtype, *s_itemsize;

/* The types whose instances were read as tensors (PyTorch's Tensor, Parameter, a subclass): a call's argument of one
 * of them is read without first asking whether it has data_ptr(), and where `dtype_size` its element size is its
 * dtype's itemsize (torch 2.1 and later), looked up below instead of a call of element_size(). Strong references:
 * a few types for the process's life. */
typedef struct {
  PyObject* type;
  int dtype_size;
} TensorType;
static TensorType g_types[8];
/* The element size of each dtype seen (dtype objects are the framework's singletons; strong references). */
typedef struct {
  PyObject* dtype;
  long size;
} DtypeSize;
static DtypeSize g_dtypes[32];

static const TensorType* tensor_type(PyObject* obj) {
  PyObject* type = (PyObject*)Py_TYPE(obj);
  for (size_t i = 0; i < sizeof g_types / sizeof *g_types && g_types[i].type; ++i)
    if (g_types[i].type == type) return &g_types[i];
  return NULL;
}

/* After `obj` was read as a tensor: its type joins the known ones (when there is room), with whether its dtype says
 * its element size (and agrees with element_size() on this object). */
static void learn_type(PyObject* obj, long element_size) {
  if (tensor_type(obj)) return;
  for (size_t i = 0; i < sizeof g_types / sizeof *g_types; ++i) {
    if (g_types[i].type) continue;
    PyObject* dtype = PyObject_GetAttr(obj, s_dtype);
    PyObject* size = dtype ? PyObject_GetAttr(dtype, s_itemsize) : NULL;
    const long itemsize = size ? PyLong_AsLong(size) : -1;
    PyErr_Clear(); /* no dtype, or none with itemsize: element_size() is called */
    Py_XDECREF(dtype), Py_XDECREF(size);
    g_types[i].type = (PyObject*)Py_TYPE(obj);
    Py_INCREF(g_types[i].type);
    g_types[i].dtype_size = itemsize == element_size;
    return;
  }
}

/* `obj`'s element size as an int object (a new reference; NULL with an exception set): from its dtype for a known
 * type whose dtype says it, else by element_size(). */
static PyObject* element_size_of(PyObject* obj) {
  const TensorType* t = tensor_type(obj);
  PyObject* dtype = t && t->dtype_size ? PyObject_GetAttr(obj, s_dtype) : NULL;
  if (dtype) {
    size_t i = 0;
    for (; i < sizeof g_dtypes / sizeof *g_dtypes && g_dtypes[i].dtype; ++i)
      if (g_dtypes[i].dtype == dtype) {
        Py_DECREF(dtype);
        return PyLong_FromLong(g_dtypes[i].size);
      }
    PyObject* size = PyObject_GetAttr(dtype, s_itemsize);
    const long itemsize = size ? PyLong_AsLong(size) : -1;
    Py_XDECREF(size);
    if (itemsize > 0 && i < sizeof g_dtypes / sizeof *g_dtypes) {
      g_dtypes[i].dtype = dtype; /* the reference is the table's */
      g_dtypes[i].size = itemsize;
      return PyLong_FromLong(itemsize);
    }
    Py_DECREF(dtype);
  }
  PyErr_Clear();
  return PyObject_CallMethodObjArgs(obj, s_element_size, NULL);
}

/* One block's tensors, as the library takes them: at most TMAGUARD_MAX_DECLARED per call (the library refuses more
 * than a thread may hold, and says so); the names' UTF-8 bytes are kept alive until the call returns. */
typedef struct {
  tmaguard_tensor t[TMAGUARD_MAX_DECLARED];
  int64_t shape[TMAGUARD_MAX_DECLARED][TMAGUARD_MAX_RANK];
  int64_t strides[TMAGUARD_MAX_DECLARED][TMAGUARD_MAX_RANK];
  PyObject* names[TMAGUARD_MAX_DECLARED];
  int n;
  int depth; /* the thread's depth before the block's first call; -1 before it */
} Block;

static void block_release(Block* b) {
  for (int i = 0; i < b->n; ++i) Py_DECREF(b->names[i]);
  b->n = 0;
}

/* Hands the tensors gathered so far to the library. */
static void block_flush(Block* b) {
  if (b->n == 0) return;
  int depth = 0;
  g_declare(b->t, b->n, &depth);
  if (b->depth < 0) b->depth = depth;
  block_release(b);
}

/* A sequence of at most TMAGUARD_MAX_RANK integers into out (a tuple, as torch.Size and stride() are, read in place);
 * its length, or -1 with an exception set, or TMAGUARD_MAX_RANK + 1 when it is longer (not read). */
static Py_ssize_t read_ints(PyObject* seq, int64_t* out) {
  const int tuple = PyTuple_Check(seq);
  const Py_ssize_t n = tuple ? PyTuple_Size(seq) : PySequence_Size(seq);
  if (n < 0 || n > TMAGUARD_MAX_RANK) return n < 0 ? -1 : TMAGUARD_MAX_RANK + 1;
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* item = tuple ? PyTuple_GetItem(seq, i) : PySequence_GetItem(seq, i);
    if (!item) return -1;
    out[i] = PyLong_AsLongLong(item);
    if (!tuple) Py_DECREF(item);
    if (out[i] == -1 && PyErr_Occurred()) return -1;
  }
  return n;
}

/* A name's UTF-8 bytes (a new reference), from a small cache: the same few names come with every block. */
static PyObject* g_names;
static PyObject* utf8_of(PyObject* name) {
  PyObject* bytes = g_names ? PyDict_GetItem(g_names, name) : NULL; /* borrowed; never raises */
  if (bytes) {
    Py_INCREF(bytes);
    return bytes;
  }
  bytes = PyUnicode_AsUTF8String(name);
  if (!bytes) return NULL;
  if (!g_names || PyDict_Size(g_names) >= 256) {
    Py_XDECREF(g_names);
    g_names = PyDict_New();
  }
  if (g_names && PyDict_SetItem(g_names, name, bytes) < 0) PyErr_Clear();
  return bytes;
}

/* Tensor `obj` into slot b->n under `name`: 1 when added, 0 when skipped (a rank over TMAGUARD_MAX_RANK: the library
 * would refuse it, and the map is judged as undeclared, as the Python helper did), -1 with an exception set. */
static int read_tensor(Block* b, PyObject* name, PyObject* obj, int lenient) {
  const int i = b->n;
  PyObject *data = NULL, *shape = NULL, *strides = NULL, *size = NULL, *tuple = NULL;
  int result = -1;
  data = PyObject_CallMethodObjArgs(obj, s_data_ptr, NULL);
  if (!data && lenient) return -1; /* no PyTorch-like tensor, or a fake one */
  if (data) {
    shape = PyObject_GetAttr(obj, s_shape);
    if (shape) strides = PyObject_CallMethodObjArgs(obj, s_stride, NULL);
    if (strides) size = element_size_of(obj);
  } else if (PyErr_ExceptionMatches(PyExc_AttributeError)) { /* no data_ptr(): an array interface, DLPack */
    PyErr_Clear();
    tuple = PyObject_CallFunctionObjArgs(g_fallback, obj, NULL);
    if (tuple && (!PyTuple_Check(tuple) || PyTuple_Size(tuple) != 4)) {
      PyErr_SetString(PyExc_TypeError, "tmaguard: metadata() did not return (data, shape, strides, element_size)");
    } else if (tuple) {
      data = PyTuple_GetItem(tuple, 0), shape = PyTuple_GetItem(tuple, 1);
      strides = PyTuple_GetItem(tuple, 2), size = PyTuple_GetItem(tuple, 3);
      Py_INCREF(data), Py_INCREF(shape), Py_INCREF(strides), Py_INCREF(size);
    }
  }
  if (size) {
    const unsigned long long address = PyLong_AsUnsignedLongLong(data);
    const long element_size = PyLong_AsLong(size);
    const Py_ssize_t rank = PyErr_Occurred() ? -1 : read_ints(shape, b->shape[i]);
    const Py_ssize_t strides_rank = rank < 0 || rank > TMAGUARD_MAX_RANK ? rank : read_ints(strides, b->strides[i]);
    if (rank > TMAGUARD_MAX_RANK) {
      result = 0;
    } else if (rank >= 0 && strides_rank != rank) {
      if (strides_rank >= 0 || !PyErr_Occurred())
        PyErr_SetString(PyExc_ValueError, "tmaguard: a tensor's strides and shape differ in length");
    } else if (rank >= 0) {
      PyObject* utf8 = utf8_of(name);
      if (utf8) {
        const char* text = PyBytes_AsString(utf8);
        b->names[i] = utf8;
        b->t[i].name = text;
        b->t[i].data = (const void*)(uintptr_t)address;
        b->t[i].shape = b->shape[i];
        b->t[i].strides = b->strides[i];
        b->t[i].rank = (int)rank;
        b->t[i].element_size = element_size > 0 && element_size <= INT_MAX ? (int)element_size : 0; /* 0: refused */
        ++b->n;
        result = 1;
        if (!tuple) learn_type(obj, element_size);
      }
    }
  }
  Py_XDECREF(data), Py_XDECREF(shape), Py_XDECREF(strides), Py_XDECREF(size), Py_XDECREF(tuple);
  return result;
}

/* Adds one tensor, flushing a full block first: read as PyTorch's tensors are when it has data_ptr() (stride() and
 * element_size() are then called), else by the fallback. `lenient`: only PyTorch-like tensors, and one whose
 * metadata cannot be read is skipped, not an error. */
static int add(Block* b, PyObject* name, PyObject* obj, int lenient) {
  /* a call's other arguments (None, numbers, strings, flags) are no tensors: skipped without a failed lookup, whose
   * exception costs more than the rest of a tensor's reading */
  if (lenient && (obj == Py_None || PyLong_Check(obj) || PyFloat_Check(obj) || PyUnicode_Check(obj) ||
                  PyTuple_Check(obj) || PyList_Check(obj) || PyDict_Check(obj) ||
                  (!tensor_type(obj) && !PyObject_HasAttr(obj, s_data_ptr))))
    return 0;
  if (b->n == TMAGUARD_MAX_DECLARED) block_flush(b);
  if (read_tensor(b, name, obj, lenient) >= 0) return 0;
  if (!lenient) return -1;
  PyErr_Clear(); /* not a tensor, or a fake or meta one: the call runs as it would without tmaguard */
  return 0;
}

/* The block's end: flushes it and returns its depth, or, on an error, undoes what it declared and returns NULL. */
static PyObject* finish(Block* b, int failed) {
  if (failed) {
    block_release(b);
    if (b->depth >= 0) g_end(b->depth);
    return NULL;
  }
  block_flush(b);
  if (b->depth < 0) { /* nothing declared: the depth now */
    int depth = 0;
    g_declare(NULL, 0, &depth);
    b->depth = depth;
  }
  return PyLong_FromLong(b->depth);
}

static int bound(void) {
  if (g_declare && g_end) return 1;
  PyErr_SetString(PyExc_RuntimeError, "tmaguard._speedups: bind() was not called");
  return 0;
}

static PyObject* sp_bind(PyObject* self, PyObject* args) {
  (void)self;
  unsigned long long declare_address = 0, end_address = 0;
  PyObject* fallback = NULL;
  if (!PyArg_ParseTuple(args, "KKO", &declare_address, &end_address, &fallback)) return NULL;
  if (!declare_address || !end_address || !PyCallable_Check(fallback)) {
    PyErr_SetString(PyExc_ValueError, "tmaguard._speedups.bind: two function addresses and a callable");
    return NULL;
  }
  g_declare = (declare_fn)(uintptr_t)declare_address;
  g_end = (end_fn)(uintptr_t)end_address;
  Py_XDECREF(g_fallback);
  Py_INCREF(fallback);
  g_fallback = fallback;
  Py_RETURN_NONE;
}

static PyObject* sp_declare(PyObject* self, PyObject* tensors) {
  (void)self;
  if (!bound()) return NULL;
  if (!PyDict_Check(tensors)) {
    PyErr_SetString(PyExc_TypeError, "tmaguard._speedups.declare takes a dict");
    return NULL;
  }
  Block b;
  b.n = 0, b.depth = -1;
  PyObject *key, *value;
  Py_ssize_t pos = 0;
  int failed = 0;
  while (!failed && PyDict_Next(tensors, &pos, &key, &value))
    if (value != Py_None) failed = add(&b, key, value, 0) < 0;
  return finish(&b, failed);
}

/* A call's tensor arguments into the thread's declarations; the depth to end at, or -1 with an exception set. */
static long declare_arguments(PyObject* names, PyObject* keywords, PyObject* call_args, PyObject* kwargs) {
  if (!PyTuple_Check(names) || !PyTuple_Check(call_args) || (kwargs && kwargs != Py_None && !PyDict_Check(kwargs))) {
    PyErr_SetString(PyExc_TypeError, "tmaguard._speedups: names and args are tuples, kwargs a dict");
    return -1;
  }
  Block b;
  b.n = 0, b.depth = -1;
  const Py_ssize_t named = PyTuple_Size(names), given = PyTuple_Size(call_args);
  for (Py_ssize_t i = 0; i < named && i < given; ++i)
    add(&b, PyTuple_GetItem(names, i), PyTuple_GetItem(call_args, i), 1);
  if (kwargs && kwargs != Py_None) {
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(kwargs, &pos, &key, &value)) {
      const int known = PySet_Contains(keywords, key);
      if (known < 0) PyErr_Clear();
      if (known > 0) add(&b, key, value, 1);
    }
  }
  PyObject* depth = finish(&b, 0);
  if (!depth) return -1;
  const long d = PyLong_AsLong(depth);
  Py_DECREF(depth);
  return d;
}

static PyObject* sp_declare_call(PyObject* self, PyObject* args) {
  (void)self;
  PyObject *names, *keywords, *call_args, *kwargs;
  if (!bound() || !PyArg_UnpackTuple(args, "declare_call", 4, 4, &names, &keywords, &call_args, &kwargs)) return NULL;
  const long depth = declare_arguments(names, keywords, call_args, kwargs);
  return depth < 0 ? NULL : PyLong_FromLong(depth);
}

/* call_declared(fn, names, keywords, args, kwargs): fn(*args, **kwargs) with its tensor arguments declared for the
 * call (declare_call, the call, end: one C call for a watched function's wrapper). */
static PyObject* sp_call_declared(PyObject* self, PyObject* args) {
  (void)self;
  PyObject *fn, *names, *keywords, *call_args, *kwargs;
  if (!bound() || !PyArg_UnpackTuple(args, "call_declared", 5, 5, &fn, &names, &keywords, &call_args, &kwargs))
    return NULL;
  const long depth = declare_arguments(names, keywords, call_args, kwargs);
  if (depth < 0) return NULL;
  PyObject* result = PyObject_Call(fn, call_args, kwargs == Py_None ? NULL : kwargs);
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback); /* fn's exception, if it raised, kept across the end */
  g_end((int)depth);
  PyErr_Restore(type, value, traceback);
  return result;
}

static PyObject* sp_end(PyObject* self, PyObject* depth) {
  (void)self;
  if (!bound()) return NULL;
  const long d = PyLong_AsLong(depth);
  if (d == -1 && PyErr_Occurred()) return NULL;
  g_end((int)d);
  Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"bind", sp_bind, METH_VARARGS, "bind(declare_address, end_address, fallback)"},
    {"declare", sp_declare, METH_O, "declare({name: tensor}) -> depth"},
    {"declare_call", sp_declare_call, METH_VARARGS,
     "declare_call(names, keywords, args, kwargs) -> depth"},
    {"call_declared", sp_call_declared, METH_VARARGS,
     "call_declared(fn, names, keywords, args, kwargs) -> fn's result"},
    {"end", sp_end, METH_O, "end(depth)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "tmaguard._speedups", NULL, -1, methods,
                                    NULL,                  NULL,                 NULL, NULL};

PyMODINIT_FUNC PyInit__speedups(void) {
  s_data_ptr = PyUnicode_InternFromString("data_ptr");
  s_shape = PyUnicode_InternFromString("shape");
  s_stride = PyUnicode_InternFromString("stride");
  s_element_size = PyUnicode_InternFromString("element_size");
  s_dtype = PyUnicode_InternFromString("dtype");
  s_itemsize = PyUnicode_InternFromString("itemsize");
  if (!s_data_ptr || !s_shape || !s_stride || !s_element_size || !s_dtype || !s_itemsize) return NULL;
  return PyModule_Create(&module);
}
