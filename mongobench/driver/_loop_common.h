/* What the driver's compiled module's parts share (driver.native builds them into one
 * module, `_loop`): _loop.c (the event loop, the module), _loop_bson.c (BSON walking, its own
 * header _loop_bson.h: it needs nothing of the others), _loop_common.c (what every compiled
 * source shares), _loop_sources.c (the keyed sources), _loop_docs.c (documents and the
 * inserts' source). */
#ifndef MONGOBENCH_LOOP_COMMON_H
#define MONGOBENCH_LOOP_COMMON_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>
#include <time.h>

#include "_loop_bson.h" /* le32, and the BSON walking every part may use */

/* time.perf_counter(): CLOCK_MONOTONIC on Linux (checked by multiplex before use) */
static inline double clock_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* random.Random's generator: MT19937 as CPython's _randommodule.c */
#define MT_N 624
#define MT_M 397
typedef struct {
    uint32_t mt[MT_N];
    int mti;
} Mt;

/* genrand_uint32 of CPython's _randommodule.c */
static inline uint32_t mt_next(Mt *g) {
    static const uint32_t mag01[2] = {0x0U, 0x9908b0dfU};
    uint32_t y, *mt = g->mt;
    if (g->mti >= MT_N) {
        int kk;
        for (kk = 0; kk < MT_N - MT_M; kk++) {
            y = (mt[kk] & 0x80000000U) | (mt[kk + 1] & 0x7fffffffU);
            mt[kk] = mt[kk + MT_M] ^ (y >> 1) ^ mag01[y & 0x1U];
        }
        for (; kk < MT_N - 1; kk++) {
            y = (mt[kk] & 0x80000000U) | (mt[kk + 1] & 0x7fffffffU);
            mt[kk] = mt[kk + (MT_M - MT_N)] ^ (y >> 1) ^ mag01[y & 0x1U];
        }
        y = (mt[MT_N - 1] & 0x80000000U) | (mt[0] & 0x7fffffffU);
        mt[MT_N - 1] = mt[MT_M - 1] ^ (y >> 1) ^ mag01[y & 0x1U];
        g->mti = 0;
    }
    y = mt[g->mti++];
    y ^= (y >> 11);
    y ^= (y << 7) & 0x9d2c5680U;
    y ^= (y << 15) & 0xefc60000U;
    y ^= (y >> 18);
    return y;
}

/* The generator from random.Random.getstate()[1]: 0, or -1 with an exception */
int mt_load(Mt *g, PyObject *state);

/* -- the compiled sources: what each has, and how the loop drives it (_loop_common.c) */
#define MAX_DRAWS 128 /* values an operation (a $in's 100 among them) */
typedef struct {
    /* the step after `out` (NULL: the first): the next request (*req, *check: borrowed).
     * 1: send it, 0: the source is done, -1: an exception. */
    int (*next)(PyObject *self, PyObject *out, PyObject **req, PyObject **check);
    /* the outcome of the reply in buf (a new reference), or NULL with an exception */
    PyObject *(*outcome)(PyObject *self, PyObject *buf, Py_ssize_t length);
} SourceOps;

typedef struct {
    const SourceOps *ops;
    PyObject *req; /* bytearray: the request; its values are patched in place */
    int ndraws;
    Py_ssize_t at[MAX_DRAWS]; /* each value's int64 in the request, in the order drawn */
    int list_n[MAX_DRAWS]; /* 0: randrange(lo, hi); n: the first of n distinct values */
    long long lo[MAX_DRAWS];
    uint32_t width[MAX_DRAWS];
    int bits[MAX_DRAWS];
    int text_k[MAX_DRAWS]; /* n > 0: n letters of alpha[d] (width[d] of them), not an int64 */
    const char *alpha[MAX_DRAWS]; /* into `draws`' bytes, which Common keeps */
    PyObject *draws;
    Mt rng;
    PyObject *check, *op, *run, *stats, *latency, *counts, *count_error, *record;
    long long i, quota; /* quota -1: endless */
    double t0;
} Common;

typedef struct { /* every source type starts so */
    PyObject_HEAD
    Common k;
} Source;

/* The constructor arguments every source type takes first (keywords, format, targets, the
 * locals they parse into, the call that keeps them): parsed in one place per type. */
#define COMMON_NAMES "template", "rid", "draws", "state", "check", "op", "quota", "run", \
    "stats", "count_error", "record"
#define COMMON_FORMAT "y*iO!O!OULOOOO"
#define COMMON_ARGS() &tmpl, &rid, &PyTuple_Type, &draws, &PyTuple_Type, &state, &check, \
    &op, &quota, &run, &stats, &count_error, &record
#define COMMON_DECL \
    Py_buffer tmpl; \
    int rid; \
    long long quota; \
    PyObject *draws, *state, *check, *op, *run, *stats, *count_error, *record;
#define COMMON_INIT(s, ops) common_init(s, ops, &tmpl, rid, draws, state, check, op, quota, \
                                        run, stats, count_error, record)
int common_init(Common *s, const SourceOps *ops, Py_buffer *tmpl, int rid, PyObject *draws,
                PyObject *state, PyObject *check, PyObject *op, long long quota, PyObject *run,
                PyObject *stats, PyObject *count_error, PyObject *record);
int common_traverse(Common *s, visitproc visit, void *arg);
void common_clear(Common *s);
int common_init_module(void); /* the names it interns: 0, or -1 */
int source_begin(Common *s);
int source_fill(Common *s); /* the next operation's values drawn into s->req: as source_begin */
double mt_random(Common *s); /* Random.random() */
int source_record(Common *s);
int source_error(Common *s, PyObject *kind, PyObject *message);
int incr_item(PyObject *d, PyObject *key, long long by);
int incr_attr(PyObject *o, PyObject *name, long long by);
PyObject *call_check(PyObject *check, PyObject *buf, Py_ssize_t length);
void source_dealloc(PyObject *self);
PyObject *source_iternext(PyObject *self);
extern PyMethodDef source_methods[];
extern PyObject *k_runtime, *s_docs, *s_bytes;

/* A compiled source's type (`var`, named mongobench.driver._loop.`name`): every source is
 * iterated, freed and given its methods alike; only its struct, init and GC hooks differ. */
#define SOURCE_TYPE(var, name, type, doc, init, traverse, clear) \
    static PyTypeObject var = { \
        PyVarObject_HEAD_INIT(NULL, 0) \
        .tp_name = "mongobench.driver._loop." name, \
        .tp_basicsize = sizeof(type), \
        .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC, \
        .tp_doc = doc, \
        .tp_new = PyType_GenericNew, \
        .tp_init = init, \
        .tp_dealloc = source_dealloc, \
        .tp_traverse = traverse, \
        .tp_clear = clear, \
        .tp_iter = PyObject_SelfIter, \
        .tp_iternext = source_iternext, \
        .tp_methods = source_methods, \
    }

/* A write's reply equal to the last success's, byte for byte, has its outcome (a check is a
 * function of the reply's bytes): kept for replies of up to LAST_MAX bytes after the header;
 * another plain success is read in C (write_success) where the check is a
 * replies.WriteCheck (what write_success reads as it does), the rest by the check */
#define LAST_MAX 256
typedef struct {
    char body[LAST_MAX];
    Py_ssize_t len;
    PyObject *out;
    int write; /* the check is a WriteCheck */
} LastReply;
void last_reset(LastReply *last, PyObject *check); /* emptied, for `check` */
/* A source's (or DocWriter's) __init__ runs once: a second one failing half-way would leave
 * a live object pointing into objects it no longer holds. 0, or -1 with RuntimeError. */
int init_once(int initialised, const char *what);
PyObject *register_write_check(PyObject *self, PyObject *cls); /* replies.WriteCheck */
PyObject *cached_outcome(LastReply *last, PyObject *check, PyObject *buf, Py_ssize_t length);

int is_source(PyObject *o);
int source_serve(PyObject *self, PyObject *buf, Py_ssize_t length, PyObject **req);

/* _loop_sources.c */
int sources_init(PyObject *module); /* the keyed sources' types into the module: 0, or -1 */

/* _loop_docs.c */
int docs_init(PyObject *module); /* its types into the module: 0, or -1 */
int is_doc_writer(PyObject *o);
/* DocFactory.write of n documents at dst (serial _ids first, first + 1, ...): 0, or -1 */
int doc_write(PyObject *writer, char *dst, Py_ssize_t n, long long first);
Py_ssize_t doc_size(PyObject *writer); /* a document's bytes */

#endif
