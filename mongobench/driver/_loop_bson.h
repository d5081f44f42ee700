/* BSON walking (_loop_bson.c): the reply checks' element count and the plain successes of
 * cursor, findAndModify and write replies. Its own header, apart from _loop_common.h, so that
 * _loop_bson.c depends on no other part of the module. */
#ifndef MONGOBENCH_LOOP_BSON_H
#define MONGOBENCH_LOOP_BSON_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

static inline int32_t le32(const char *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return (int32_t)v; /* wire integers are little-endian; so is every target of this module */
}

Py_ssize_t bson_count(const unsigned char *b, Py_ssize_t size, Py_ssize_t start,
                      const char **bad, int *unknown);
PyObject *cursor_success(const unsigned char *b, Py_ssize_t length, const char *batch);
PyObject *count_elements(PyObject *self, PyObject *a);
PyObject *cursor_success_py(PyObject *self, PyObject *a);
PyObject *find_and_modify_success(const unsigned char *b, Py_ssize_t length);
PyObject *find_and_modify_success_py(PyObject *self, PyObject *a);
PyObject *write_success(const unsigned char *b, Py_ssize_t length);
PyObject *write_success_py(PyObject *self, PyObject *a);

#endif
