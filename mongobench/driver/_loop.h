/* What the driver's compiled module's parts share (driver.native builds them into one
 * module, `_loop`): _loop.c (the event loop, the module), _loop_bson.c (BSON walking: the
 * checks' element count, a cursor's plain success), _loop_sources.c (the compiled sources). */
#ifndef MONGOBENCH_LOOP_H
#define MONGOBENCH_LOOP_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>
#include <time.h>

/* time.perf_counter(): CLOCK_MONOTONIC on Linux (checked by multiplex before use) */
static inline double clock_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline int32_t le32(const char *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return (int32_t)v; /* wire integers are little-endian; so is every target of this module */
}

/* _loop_bson.c */
Py_ssize_t bson_count(const unsigned char *b, Py_ssize_t size, Py_ssize_t start,
                      const char **bad, int *unknown);
PyObject *cursor_success(const unsigned char *b, Py_ssize_t length, const char *batch);
PyObject *count_elements(PyObject *self, PyObject *a);
PyObject *cursor_success_py(PyObject *self, PyObject *a);

/* _loop_sources.c */
int sources_init(PyObject *module); /* its types into the module: 0, or -1 */
int is_source(PyObject *o);
int source_serve(PyObject *self, PyObject *buf, Py_ssize_t length, PyObject **req);

#endif
