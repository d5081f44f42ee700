/* The multiplexed driver's event loop in C (multiplex.Loop.run_all's inner loop), and the
 * reply checks' element count (replies.count_elements).
 *
 * Per reply it does what the Python loop does: read it whole into the client's buffer, check
 * its header (length, responseTo), call the client's check, hand the outcome to its source
 * (a generator) and send the request it yields. Everything rare stays in Python: failures
 * (Loop._fail), a source's end (Loop._drop), partial sends (Loop._pend, Loop._flush), and the
 * loop's ticks, deadline and per-interval cuts (run_all, between calls). So the sources, checks
 * and accounting are the Python path's own; only the loop's bytecode is gone (measured by
 * scripts/bench_client.py --replay: docs/driver.md).
 *
 * run(epfd, conns, until, loop, run, max_message) -> (now, time of the last wake-up with
 * events or None): waits and serves replies until perf_counter() >= until or no client is
 * left. conns maps fd -> multiplex._Conn. Closed loop and plain sockets only (the caller
 * checks).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>

#define MAX_EVENTS 256
#ifndef LOOP_SOURCE_HASH
#error "built by mongobench.driver.native, which names the source's hash"
#endif

static PyObject *s_buf, *s_view, *s_got, *s_rid, *s_gen, *s_check, *s_pending, *s_now,
    *s_stopped, *s_fail, *s_drop, *s_pend, *s_flush, *k_reconnect, *k_protocol;

/* time.perf_counter(): CLOCK_MONOTONIC on Linux (checked by multiplex before use) */
static double clock_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int32_t le32(const char *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return (int32_t)v; /* wire integers are little-endian; so is every target of this module */
}

/* loop._fail(c, kind, message): 0, or -1 with an exception set */
static int fail(PyObject *loop, PyObject *c, PyObject *kind, PyObject *message) {
    if (message == NULL) return -1;
    PyObject *r = PyObject_CallMethodObjArgs(loop, s_fail, c, kind, message, NULL);
    Py_DECREF(message);
    if (r == NULL) return -1;
    Py_DECREF(r);
    return 0;
}

/* "<what>: <OSError's str>", as the Python loop words a socket error */
static PyObject *os_message(const char *what, int err) {
    PyObject *args = Py_BuildValue("(is)", err, strerror(err));
    if (args == NULL) return NULL;
    PyObject *e = PyObject_Call(PyExc_OSError, args, NULL); /* the errno's subclass */
    Py_DECREF(args);
    if (e == NULL) return NULL;
    PyObject *m = PyUnicode_FromFormat("%s: %S", what, e);
    Py_DECREF(e);
    return m;
}

static long attr_long(PyObject *o, PyObject *name) {
    PyObject *v = PyObject_GetAttr(o, name);
    if (v == NULL) return -1;
    long r = PyLong_AsLong(v);
    Py_DECREF(v);
    return r;
}

static int set_got(PyObject *c, Py_ssize_t got) {
    PyObject *v = PyLong_FromSsize_t(got);
    if (v == NULL) return -1;
    int r = PyObject_SetAttr(c, s_got, v);
    Py_DECREF(v);
    return r;
}

/* Grows the client's buffer to hold `length` bytes (as _read_rest: max(length, 2 x size)). */
static PyObject *grow(PyObject *c, PyObject *buf, Py_ssize_t length, Py_ssize_t got) {
    Py_ssize_t size = PyByteArray_GET_SIZE(buf);
    PyObject *grown = PyByteArray_FromStringAndSize(NULL, length > 2 * size ? length : 2 * size);
    if (grown == NULL) return NULL;
    memcpy(PyByteArray_AS_STRING(grown), PyByteArray_AS_STRING(buf), (size_t)got);
    PyObject *view = PyMemoryView_FromObject(grown);
    if (view == NULL || PyObject_SetAttr(c, s_buf, grown) < 0 ||
        PyObject_SetAttr(c, s_view, view) < 0) {
        Py_XDECREF(view);
        Py_DECREF(grown);
        return NULL;
    }
    Py_DECREF(view);
    Py_DECREF(grown); /* c holds it */
    return grown;
}

/* Sends `data` (bytes-like); what the socket does not take goes to loop._pend(c, data, n). */
static int send_request(PyObject *loop, PyObject *c, int fd, PyObject *data) {
    Py_buffer view;
    if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0) return -1;
    ssize_t n;
    for (;;) {
        n = send(fd, view.buf, (size_t)view.len, 0);
        if (n >= 0) break;
        if (errno == EINTR) {
            if (PyErr_CheckSignals() < 0) {
                PyBuffer_Release(&view);
                return -1;
            }
            continue;
        }
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            n = 0;
            break;
        }
        int err = errno;
        PyBuffer_Release(&view);
        return fail(loop, c, k_reconnect, os_message("send", err));
    }
    Py_ssize_t len = view.len;
    PyBuffer_Release(&view);
    if (n == len) return 0;
    PyObject *sent = PyLong_FromSsize_t(n);
    if (sent == NULL) return -1;
    PyObject *r = PyObject_CallMethodObjArgs(loop, s_pend, c, data, sent, NULL);
    Py_DECREF(sent);
    if (r == NULL) return -1;
    Py_DECREF(r);
    return 0;
}

/* Reads client c's reply whole into its buffer: 1 (*bufp: the buffer, a new reference;
 * *lenp: the reply's length), 0 (not whole yet, or the client failed), -1 (an exception). */
static int read_reply(PyObject *loop, PyObject *c, int fd, Py_ssize_t max_message,
                      PyObject **bufp, Py_ssize_t *lenp) {
    long got0 = attr_long(c, s_got);
    if (got0 == -1 && PyErr_Occurred()) return -1;
    PyObject *buf = PyObject_GetAttr(c, s_buf);
    if (buf == NULL) return -1;
    if (!PyByteArray_Check(buf)) {
        Py_DECREF(buf);
        PyErr_SetString(PyExc_TypeError, "a client's buffer must be a bytearray");
        return -1;
    }
    Py_ssize_t got = got0, length = 0;
    int r;
    for (;;) {
        Py_ssize_t cap = PyByteArray_GET_SIZE(buf);
        ssize_t n = recv(fd, PyByteArray_AS_STRING(buf) + got, (size_t)(cap - got), 0);
        if (n < 0) {
            if (errno == EINTR) {
                if (PyErr_CheckSignals() < 0) goto error;
                continue;
            }
            if (errno == EAGAIN || errno == EWOULDBLOCK) { /* the rest comes later */
                r = got != got0 ? set_got(c, got) : 0;
                goto done;
            }
            r = fail(loop, c, k_reconnect, os_message("receive", errno));
            goto done;
        }
        if (n == 0) {
            r = fail(loop, c, k_reconnect,
                     PyUnicode_FromString("connection closed by the server"));
            goto done;
        }
        got += n;
        if (got < 16) continue;
        length = le32(PyByteArray_AS_STRING(buf));
        if (got >= length) break; /* more than the length fails below, as in Python */
        if (length < 21 || length > max_message) {
            r = fail(loop, c, k_protocol,
                     PyUnicode_FromFormat("malformed reply (length %zd)", length));
            goto done;
        }
        if (length > cap) {
            PyObject *grown = grow(c, buf, length, got);
            if (grown == NULL) goto error;
            Py_INCREF(grown);
            Py_DECREF(buf);
            buf = grown;
        }
    }
    if (got0 && set_got(c, 0) < 0) goto error;
    long rid = attr_long(c, s_rid);
    if (rid == -1 && PyErr_Occurred()) goto error;
    int32_t response_to = le32(PyByteArray_AS_STRING(buf) + 8);
    if (got != length || response_to != rid) {
        r = fail(loop, c, k_protocol,
                 PyUnicode_FromFormat("unexpected reply (to %d, %zd bytes)", (int)response_to,
                                      got));
        goto done;
    }
    *bufp = buf;
    *lenp = length;
    return 1;
error:
    r = -1;
done:
    Py_DECREF(buf);
    return r;
}

/* ------------------------------------------------------------------------- keyed writes
 * KeyedWrites: sources._writes for a keyed write without a document (sources.executor: a
 * KeyedWrite whose only value is one uniform key, or none), in C, so the compiled loop
 * serves its clients with no bytecode per operation. It is the Python source's twin:
 *   - the same requests: the template with the client's request id, each operation's key
 *     drawn as random.Random(index + 1).randrange(keys) draws it (the generator's state
 *     copied, MT19937 and getrandbits as CPython's _randommodule.c);
 *   - the same accounting, on the same objects: latency (LatencyRecorder._pending, in whole
 *     microseconds from the request's fill to the wake-up that read its reply), stats.ops,
 *     docs, bytes, and errors through multiplex.count_error;
 *   - the same protocol: iterating it yields (request, check), send(outcome) takes the
 *     check's outcome (so the Python loop can run it too: the tests compare both).
 * The compiled loop calls the check itself (keyed_serve), skipping it for a reply whose
 * bytes equal the last success's (the check is a function of those bytes). */

#define MT_N 624
#define MT_M 397
#define LAST_MAX 256

static PyObject *s_latency, *s_tick, *s_pending_lat, *s_docs, *s_bytes, *k_runtime;

typedef struct {
    PyObject_HEAD
    PyObject *req; /* bytearray: the request; its key is patched in place */
    Py_ssize_t key_at; /* offset of the key's int64 in the request; -1: no key */
    uint32_t keys;
    int bits;
    uint32_t mt[MT_N];
    int mti;
    PyObject *check, *op, *expect_msg, *run, *stats, *latency, *counts, *count_error,
        *record;
    int field; /* the outcome's field of the documents written (1: n, 2: nModified) */
    int has_expect;
    long long expect, size, i, quota; /* quota -1: endless */
    double t0;
    char last[LAST_MAX]; /* the last success reply's bytes after the header, its outcome */
    Py_ssize_t last_len;
    PyObject *last_out;
} KeyedWrites;

/* genrand_uint32 of CPython's _randommodule.c */
static uint32_t mt_next(KeyedWrites *s) {
    static const uint32_t mag01[2] = {0x0U, 0x9908b0dfU};
    uint32_t y, *mt = s->mt;
    if (s->mti >= MT_N) {
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
        s->mti = 0;
    }
    y = mt[s->mti++];
    y ^= (y >> 11);
    y ^= (y << 7) & 0x9d2c5680U;
    y ^= (y << 15) & 0xefc60000U;
    y ^= (y >> 18);
    return y;
}

/* Random.randrange(keys) for 0 < keys < 2**32 (_randbelow_with_getrandbits) */
static uint32_t mt_below(KeyedWrites *s) {
    uint32_t r;
    do {
        r = mt_next(s) >> (32 - s->bits);
    } while (r >= s->keys);
    return r;
}

/* The next operation's request filled: 1, 0 when the source is done (the run stopped, the
 * quota reached), -1 with an exception set. */
static int keyed_fill(KeyedWrites *s) {
    PyObject *stopped = PyObject_GetAttr(s->run, s_stopped);
    if (stopped == NULL) return -1;
    int stop = PyObject_IsTrue(stopped);
    Py_DECREF(stopped);
    if (stop != 0) return stop < 0 ? -1 : 0;
    if (s->quota >= 0 && s->i >= s->quota) return 0;
    s->i++;
    if (s->key_at >= 0) {
        int64_t key = (int64_t)mt_below(s);
        memcpy(PyByteArray_AS_STRING(s->req) + s->key_at, &key, 8); /* little-endian */
    }
    s->t0 = clock_now();
    return 1;
}

/* d[key] += by (a Counter's item, missing as 0) */
static int incr_item(PyObject *d, PyObject *key, long long by) {
    PyObject *v = PyDict_GetItemWithError(d, key);
    if (v == NULL && PyErr_Occurred()) return -1;
    long long x = v == NULL ? 0 : PyLong_AsLongLong(v);
    if (x == -1 && PyErr_Occurred()) return -1;
    PyObject *nv = PyLong_FromLongLong(x + by);
    if (nv == NULL) return -1;
    int r = PyDict_SetItem(d, key, nv);
    Py_DECREF(nv);
    return r;
}

static int incr_attr(PyObject *o, PyObject *name, long long by) {
    PyObject *v = PyObject_GetAttr(o, name);
    if (v == NULL) return -1;
    long long x = PyLong_AsLongLong(v);
    Py_DECREF(v);
    if (x == -1 && PyErr_Occurred()) return -1;
    PyObject *nv = PyLong_FromLongLong(x + by);
    if (nv == NULL) return -1;
    int r = PyObject_SetAttr(o, name, nv);
    Py_DECREF(nv);
    return r;
}

static int call_count_error(KeyedWrites *s, PyObject *kind, PyObject *message) {
    PyObject *r = PyObject_CallFunctionObjArgs(s->count_error, s->stats, s->op, kind, message,
                                               NULL);
    Py_XDECREF(r);
    return r == NULL ? -1 : 0;
}

/* LatencyRecorder.record(op, micros): the pending Counter's item, in C when the recorder
 * has no tick and a Counter for op (else its own method, which makes them) */
static int record_latency(KeyedWrites *s, double micros) {
    PyObject *tick = PyObject_GetAttr(s->latency, s_tick);
    if (tick == NULL) return -1;
    int plain = tick == Py_None;
    Py_DECREF(tick);
    PyObject *pending = plain ? PyObject_GetAttr(s->latency, s_pending_lat) : NULL;
    if (plain && pending == NULL) return -1;
    PyObject *counter = plain ? PyDict_GetItemWithError(pending, s->op) : NULL;
    Py_XDECREF(pending); /* the recorder holds it, and the counter */
    if (counter == NULL) {
        if (PyErr_Occurred()) return -1;
        PyObject *m = PyFloat_FromDouble(micros);
        if (m == NULL) return -1;
        PyObject *r = PyObject_CallFunctionObjArgs(s->record, s->op, m, NULL);
        Py_DECREF(m);
        Py_XDECREF(r);
        return r == NULL ? -1 : 0;
    }
    PyObject *key = PyLong_FromLongLong((long long)micros); /* int(): toward zero */
    if (key == NULL) return -1;
    int r = incr_item(counter, key, 1);
    Py_DECREF(key);
    return r;
}

/* What sources._writes does with an outcome: 0, or -1 with an exception set */
static int keyed_account(KeyedWrites *s, PyObject *out) {
    if (!PyTuple_Check(out) || PyTuple_GET_SIZE(out) < 5) {
        PyErr_SetString(PyExc_TypeError, "a write check's outcome is a tuple of 6");
        return -1;
    }
    PyObject *kind = PyTuple_GET_ITEM(out, 0);
    if (kind != Py_None) return call_count_error(s, kind, PyTuple_GET_ITEM(out, 4));
    PyObject *now = PyObject_GetAttr(s->run, s_now);
    if (now == NULL) return -1;
    double at = PyFloat_AsDouble(now);
    Py_DECREF(now);
    if (at == -1.0 && PyErr_Occurred()) return -1;
    if (record_latency(s, (at - s->t0) * 1e6) < 0) return -1;
    long long n = 1;
    if (s->field) {
        n = PyLong_AsLongLong(PyTuple_GET_ITEM(out, s->field));
        if (n == -1 && PyErr_Occurred()) return -1;
    }
    if (s->has_expect && n != s->expect) return call_count_error(s, k_runtime, s->expect_msg);
    if (incr_item(s->counts, s->op, 1) < 0 || incr_attr(s->stats, s_docs, n) < 0) return -1;
    return incr_attr(s->stats, s_bytes, s->size * n);
}

/* (request, check), or NULL: done (no exception) or an exception */
static PyObject *keyed_yield(KeyedWrites *s) {
    int r = keyed_fill(s);
    if (r <= 0) return NULL;
    return PyTuple_Pack(2, s->req, s->check);
}

static PyObject *keyed_iternext(PyObject *self) { return keyed_yield((KeyedWrites *)self); }

static PyObject *keyed_send(PyObject *self, PyObject *out) {
    KeyedWrites *s = (KeyedWrites *)self;
    if (keyed_account(s, out) < 0) return NULL;
    PyObject *next = keyed_yield(s);
    if (next == NULL && !PyErr_Occurred()) PyErr_SetNone(PyExc_StopIteration);
    return next;
}

static PyObject *keyed_close(PyObject *self, PyObject *unused) { Py_RETURN_NONE; }

/* The compiled loop's step for a reply in buf: the check (or the last success's outcome,
 * for the same bytes), the accounting, the next request (*req, borrowed). 1: send it, 0: the
 * source is done, -1: an exception. */
static int keyed_serve(KeyedWrites *s, PyObject *buf, Py_ssize_t length, PyObject **req) {
    const char *body = PyByteArray_AS_STRING(buf) + 16;
    Py_ssize_t n = length - 16;
    PyObject *out;
    if (s->last_out != NULL && n == s->last_len && memcmp(body, s->last, (size_t)n) == 0) {
        out = s->last_out;
        Py_INCREF(out);
    } else {
        PyObject *len_obj = PyLong_FromSsize_t(length);
        if (len_obj == NULL) return -1;
        PyObject *args[2] = {buf, len_obj};
        out = PyObject_Vectorcall(s->check, args, 2, NULL);
        Py_DECREF(len_obj);
        if (out == NULL) return -1;
        if (n <= LAST_MAX && PyTuple_Check(out) && PyTuple_GET_SIZE(out) > 0 &&
            PyTuple_GET_ITEM(out, 0) == Py_None) {
            memcpy(s->last, body, (size_t)n);
            s->last_len = n;
            Py_INCREF(out);
            Py_XSETREF(s->last_out, out);
        }
    }
    int r = keyed_account(s, out);
    Py_DECREF(out);
    if (r < 0) return -1;
    r = keyed_fill(s);
    *req = s->req;
    return r;
}

static int keyed_init(PyObject *self, PyObject *a, PyObject *kw) {
    KeyedWrites *s = (KeyedWrites *)self;
    static char *names[] = {"template", "rid", "key_at", "keys", "state", "check", "op",
                            "field", "expect", "expect_msg", "size", "quota", "run", "stats",
                            "count_error", "record", NULL};
    Py_buffer tmpl;
    int rid;
    Py_ssize_t key_at;
    unsigned long long keys;
    long long expect, size, quota;
    PyObject *state, *check, *op, *expect_msg, *run, *stats, *count_error, *record;
    if (!PyArg_ParseTupleAndKeywords(a, kw, "y*inKO!OUiLOLLOOOO", names, &tmpl, &rid, &key_at,
                                     &keys, &PyTuple_Type, &state, &check, &op, &s->field,
                                     &expect, &expect_msg, &size, &quota, &run, &stats,
                                     &count_error, &record))
        return -1;
    int bad = key_at >= 0 && (keys == 0 || keys > 0xffffffffULL || key_at < 16 ||
                              key_at + 8 > tmpl.len);
    bad = bad || tmpl.len < 16 || s->field < 0 || s->field > 4 ||
          PyTuple_GET_SIZE(state) != MT_N + 1;
    if (bad) {
        PyBuffer_Release(&tmpl);
        PyErr_SetString(PyExc_ValueError, "KeyedWrites: a key slot past the template, keys"
                                          " outside (0, 2**32), or not a generator's state");
        return -1;
    }
    PyObject *req = PyByteArray_FromStringAndSize(tmpl.buf, tmpl.len);
    PyBuffer_Release(&tmpl);
    if (req == NULL) return -1;
    memcpy(PyByteArray_AS_STRING(req) + 4, &rid, 4);
    for (int k = 0; k <= MT_N; k++) {
        unsigned long v = PyLong_AsUnsignedLong(PyTuple_GET_ITEM(state, k));
        if (v == (unsigned long)-1 && PyErr_Occurred()) {
            Py_DECREF(req);
            return -1;
        }
        if (k < MT_N) s->mt[k] = (uint32_t)v;
        else s->mti = (int)v;
    }
    PyObject *latency = PyObject_GetAttr(stats, s_latency);
    PyObject *counts = latency ? PyObject_GetAttrString(stats, "ops") : NULL;
    if (counts == NULL || !PyDict_Check(counts)) {
        Py_XDECREF(latency);
        Py_XDECREF(counts);
        Py_DECREF(req);
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "stats.ops must be a dict");
        return -1;
    }
    Py_XSETREF(s->req, req);
    Py_XSETREF(s->latency, latency);
    Py_XSETREF(s->counts, counts);
#define KEEP(field) Py_INCREF(field); Py_XSETREF(s->field, field);
    KEEP(check) KEEP(op) KEEP(expect_msg) KEEP(run) KEEP(stats) KEEP(count_error) KEEP(record)
#undef KEEP
    s->key_at = key_at;
    s->keys = (uint32_t)keys;
    s->bits = 0;
    for (unsigned long long k = keys; k; k >>= 1) s->bits++; /* keys.bit_length() */
    s->has_expect = expect_msg != Py_None;
    s->expect = expect;
    s->size = size;
    s->quota = quota;
    s->i = 0;
    s->last_len = 0;
    Py_CLEAR(s->last_out);
    return 0;
}

static int keyed_traverse(PyObject *self, visitproc visit, void *arg) {
    KeyedWrites *s = (KeyedWrites *)self;
    Py_VISIT(s->req); Py_VISIT(s->check); Py_VISIT(s->op); Py_VISIT(s->expect_msg);
    Py_VISIT(s->run); Py_VISIT(s->stats); Py_VISIT(s->latency); Py_VISIT(s->counts);
    Py_VISIT(s->count_error); Py_VISIT(s->record); Py_VISIT(s->last_out);
    return 0;
}

static int keyed_clear(PyObject *self) {
    KeyedWrites *s = (KeyedWrites *)self;
    Py_CLEAR(s->req); Py_CLEAR(s->check); Py_CLEAR(s->op); Py_CLEAR(s->expect_msg);
    Py_CLEAR(s->run); Py_CLEAR(s->stats); Py_CLEAR(s->latency); Py_CLEAR(s->counts);
    Py_CLEAR(s->count_error); Py_CLEAR(s->record); Py_CLEAR(s->last_out);
    return 0;
}

static void keyed_dealloc(PyObject *self) {
    PyObject_GC_UnTrack(self);
    keyed_clear(self);
    Py_TYPE(self)->tp_free(self);
}

static PyMethodDef keyed_methods[] = {
    {"send", keyed_send, METH_O, "send(outcome) -> the next (request, check)"},
    {"close", keyed_close, METH_NOARGS, "nothing to release"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject KeyedWritesType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "mongobench.driver._loop.KeyedWrites",
    .tp_basicsize = sizeof(KeyedWrites),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "sources._writes of a keyed write without a document, in C",
    .tp_new = PyType_GenericNew,
    .tp_init = keyed_init,
    .tp_dealloc = keyed_dealloc,
    .tp_traverse = keyed_traverse,
    .tp_clear = keyed_clear,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = keyed_iternext,
    .tp_methods = keyed_methods,
};

/* One event of client c (fd): its reply read and served. 0, or -1 with an exception set. */
static int serve(PyObject *loop, PyObject *run, PyObject *c, int fd, uint32_t ev,
                 Py_ssize_t max_message) {
    if (ev & EPOLLOUT) {
        PyObject *pending = PyObject_GetAttr(c, s_pending);
        if (pending == NULL) return -1;
        int has = pending != Py_None;
        Py_DECREF(pending);
        if (has) {
            PyObject *r = PyObject_CallMethodObjArgs(loop, s_flush, c, NULL);
            if (r == NULL) return -1;
            Py_DECREF(r);
            if ((pending = PyObject_GetAttr(c, s_pending)) == NULL) return -1;
            has = pending != Py_None;
            Py_DECREF(pending);
            if (has || !(ev & ~(uint32_t)EPOLLOUT)) return 0;
        }
    }
    PyObject *buf = NULL;
    Py_ssize_t length = 0;
    int got = read_reply(loop, c, fd, max_message, &buf, &length);
    if (got <= 0) return got;
    PyObject *gen = PyObject_GetAttr(c, s_gen);
    if (gen == NULL) {
        Py_DECREF(buf);
        return -1;
    }
    PyObject *yielded = NULL;
    PySendResult sent;
    if (Py_IS_TYPE(gen, &KeyedWritesType)) { /* a source in C: no call out per reply */
        PyObject *req;
        int r = keyed_serve((KeyedWrites *)gen, buf, length, &req);
        Py_DECREF(buf);
        if (r == 1) {
            r = send_request(loop, c, fd, req);
            Py_DECREF(gen);
            return r;
        }
        Py_DECREF(gen);
        if (r < 0) return -1;
        Py_INCREF(Py_None); /* done: as a generator's return */
        yielded = Py_None;
        sent = PYGEN_RETURN;
    } else {
        PyObject *check = PyObject_GetAttr(c, s_check);
        PyObject *len_obj = PyLong_FromSsize_t(length);
        PyObject *outcome = NULL;
        if (check != NULL && len_obj != NULL) {
            PyObject *args[2] = {buf, len_obj};
            outcome = PyObject_Vectorcall(check, args, 2, NULL);
        }
        Py_XDECREF(check);
        Py_XDECREF(len_obj);
        Py_DECREF(buf);
        if (outcome == NULL) {
            Py_DECREF(gen);
            return -1;
        }
        sent = PyIter_Send(gen, outcome, &yielded);
        Py_DECREF(gen);
        Py_DECREF(outcome);
    }
    if (sent == PYGEN_ERROR) return -1;
    if (sent == PYGEN_RETURN) { /* its work is done, or it saw the stop */
        Py_DECREF(yielded);
        if (PyObject_SetAttr(c, s_check, Py_None) < 0) return -1;
        PyObject *stopped = PyObject_GetAttr(run, s_stopped);
        if (stopped == NULL) return -1;
        PyObject *r = PyObject_CallMethodObjArgs(loop, s_drop, c, stopped, NULL);
        Py_DECREF(stopped);
        if (r == NULL) return -1;
        Py_DECREF(r);
        return 0;
    }
    if (!PyTuple_Check(yielded) || PyTuple_GET_SIZE(yielded) != 2) {
        Py_DECREF(yielded);
        PyErr_SetString(PyExc_TypeError, "a source must yield (request, check)");
        return -1;
    }
    int r = PyObject_SetAttr(c, s_check, PyTuple_GET_ITEM(yielded, 1));
    if (r == 0) r = send_request(loop, c, fd, PyTuple_GET_ITEM(yielded, 0));
    Py_DECREF(yielded);
    return r;
}

static PyObject *run_loop(PyObject *self, PyObject *a) {
    int epfd;
    double until;
    PyObject *conns, *loop, *run;
    Py_ssize_t max_message;
    if (!PyArg_ParseTuple(a, "iO!dOOn", &epfd, &PyDict_Type, &conns, &until, &loop, &run,
                          &max_message))
        return NULL;
    struct epoll_event events[MAX_EVENTS];
    double now = clock_now(), seen = -1.0;
    while (PyDict_GET_SIZE(conns) > 0 && now < until) {
        int ms = (int)ceil((until - now) * 1e3), n;
        Py_BEGIN_ALLOW_THREADS
        n = epoll_wait(epfd, events, MAX_EVENTS, ms);
        Py_END_ALLOW_THREADS
        if (n < 0) {
            if (errno != EINTR) return PyErr_SetFromErrno(PyExc_OSError);
            if (PyErr_CheckSignals() < 0) return NULL;
            n = 0;
        }
        now = clock_now();
        PyObject *t = PyFloat_FromDouble(now);
        if (t == NULL || PyObject_SetAttr(run, s_now, t) < 0) {
            Py_XDECREF(t);
            return NULL;
        }
        Py_DECREF(t);
        if (n > 0) seen = now;
        for (int i = 0; i < n; i++) {
            int fd = events[i].data.fd;
            PyObject *key = PyLong_FromLong(fd);
            if (key == NULL) return NULL;
            PyObject *c = PyDict_GetItemWithError(conns, key); /* borrowed */
            Py_DECREF(key);
            if (c == NULL) {
                if (PyErr_Occurred()) return NULL;
                continue; /* dropped meanwhile */
            }
            Py_INCREF(c);
            int r = serve(loop, run, c, fd, events[i].events, max_message);
            Py_DECREF(c);
            if (r < 0) return NULL;
        }
    }
    if (seen < 0) return Py_BuildValue("(dO)", now, Py_None);
    return Py_BuildValue("(dd)", now, seen);
}

/* count_elements(buf, start) -> the elements of the BSON array (or document) at `start`,
 * walking their headers as replies.count_elements does (its reference); ValueError where
 * that raises (an unknown type, a name or value past the buffer) and where it would loop
 * (a length that does not advance). */
static PyObject *count_elements(PyObject *self, PyObject *a) {
    Py_buffer view;
    Py_ssize_t start;
    if (!PyArg_ParseTuple(a, "y*n", &view, &start)) return NULL;
    const unsigned char *b = view.buf;
    Py_ssize_t size = view.len, n = 0;
    const char *bad = NULL;
    if (start < 0 || start + 4 > size) {
        bad = "array header past the buffer";
        goto out;
    }
    Py_ssize_t end = start + le32((const char *)b + start) - 1, p = start + 4;
    while (p < end) {
        if (p >= size) {
            bad = "element past the buffer";
            break;
        }
        int t = b[p];
        const unsigned char *z = memchr(b + p + 1, 0, (size_t)(size - p - 1));
        if (z == NULL) {
            bad = "element name without its NUL";
            break;
        }
        Py_ssize_t v = z - b + 1, q; /* the value's start, its end */
        int32_t len = 0;
        if (t == 1 || t == 9 || t == 17 || t == 18 || t == 3 || t == 4 || t == 2 || t == 13 ||
            t == 14 || t == 5 || t == 15 || t == 12 || t == 16) {
            if (t != 1 && t != 9 && t != 17 && t != 18) {
                if (v + 4 > size) {
                    bad = "value length past the buffer";
                    break;
                }
                len = le32((const char *)b + v);
            }
        }
        switch (t) {
        case 1: case 9: case 17: case 18: q = v + 8; break;
        case 16: q = v + 4; break;
        case 3: case 4: case 15: q = v + len; break;
        case 2: case 13: case 14: q = v + 4 + len; break;
        case 8: q = v + 1; break;
        case 6: case 10: case 127: case 255: q = v; break;
        case 7: q = v + 12; break;
        case 5: q = v + 5 + len; break;
        case 19: q = v + 16; break;
        case 12: q = v + 4 + len + 12; break;
        case 11: {
            const unsigned char *r = memchr(b + v, 0, (size_t)(size - v));
            const unsigned char *o = r ? memchr(r + 1, 0, (size_t)(size - (r + 1 - b))) : NULL;
            if (o == NULL) {
                bad = "regex without its NULs";
                goto out;
            }
            q = o - b + 1;
            break;
        }
        default:
            PyBuffer_Release(&view);
            return PyErr_Format(PyExc_ValueError, "unknown BSON type %d", t);
        }
        if (q <= p) {
            bad = "a length that does not advance";
            break;
        }
        p = q;
        n++;
    }
out:
    PyBuffer_Release(&view);
    if (bad) return PyErr_Format(PyExc_ValueError, "malformed BSON: %s", bad);
    return PyLong_FromSsize_t(n);
}

static PyMethodDef methods[] = {
    {"count_elements", count_elements, METH_VARARGS,
     "count_elements(buf, start) -> the elements of the BSON array at start"},
    {"run", run_loop, METH_VARARGS,
     "run(epfd, conns, until, loop, run, max_message) -> (now, last wake-up with events)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_loop", NULL, -1, methods};

PyMODINIT_FUNC PyInit__loop(void) {
#define INTERN(var, text) \
    if ((var = PyUnicode_InternFromString(text)) == NULL) return NULL;
    INTERN(s_buf, "buf");
    INTERN(s_view, "view");
    INTERN(s_got, "got");
    INTERN(s_rid, "rid");
    INTERN(s_gen, "gen");
    INTERN(s_check, "check");
    INTERN(s_pending, "pending");
    INTERN(s_now, "now");
    INTERN(s_stopped, "stopped");
    INTERN(s_fail, "_fail");
    INTERN(s_drop, "_drop");
    INTERN(s_pend, "_pend");
    INTERN(s_flush, "_flush");
    INTERN(k_reconnect, "AutoReconnect");
    INTERN(k_protocol, "ProtocolError");
    INTERN(s_latency, "latency");
    INTERN(s_tick, "tick");
    INTERN(s_pending_lat, "_pending");
    INTERN(s_docs, "docs");
    INTERN(s_bytes, "bytes");
    INTERN(k_runtime, "RuntimeError");
    if (PyType_Ready(&KeyedWritesType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    Py_INCREF(&KeyedWritesType);
    if (PyModule_AddStringConstant(m, "SOURCE_HASH", LOOP_SOURCE_HASH) < 0 ||
        PyModule_AddObject(m, "KeyedWrites", (PyObject *)&KeyedWritesType) < 0) {
        Py_DECREF(&KeyedWritesType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
