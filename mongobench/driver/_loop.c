/* The multiplexed driver's event loop in C (multiplex.Loop.run_all's inner loop), and the
 * module `_loop` (with _loop_bson.c, _loop_common.c, _loop_sources.c and _loop_docs.c; see
 * _loop_common.h).
 *
 * Per reply it does what the Python loop does: read it whole into the client's buffer, check
 * its header (length, responseTo), call the client's check, hand the outcome to its source
 * (a generator) and send the request it yields; a compiled source (_loop_sources.c) is served
 * without calling into Python but for its checks' uncommon replies. Everything rare stays in
 * Python: failures (Loop._fail), a source's end (Loop._drop), partial sends (Loop._pend,
 * Loop._flush), and the loop's ticks, deadline and per-interval cuts (run_all, between calls)
 * (measured by scripts/bench_client.py --replay: docs/driver.md).
 *
 * run(epfd, conns, until, loop, run, max_message) -> (now, time of the last wake-up with
 * events or None): waits and serves replies until perf_counter() >= until or no client is
 * left. conns maps fd -> multiplex._Conn. Closed loop and plain sockets only (the caller
 * checks).
 */
#include "_loop_common.h"

#include <errno.h>
#include <math.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#define MAX_EVENTS 256
#ifndef LOOP_SOURCE_HASH
#error "built by mongobench.driver.native, which names the source's hash"
#endif

static PyObject *s_buf, *s_view, *s_got, *s_rid, *s_gen, *s_check, *s_pending, *s_now,
    *s_stopped, *s_fail, *s_drop, *s_pend, *s_flush, *k_reconnect, *k_protocol;

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
    if (is_source(gen)) { /* a source in C: no call out per reply but its check */
        PyObject *req;
        int r = source_serve(gen, buf, length, &req);
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

static PyMethodDef methods[] = {
    {"cursor_success", cursor_success_py, METH_VARARGS,
     "cursor_success(buf, length, batch) -> a plain success's outcome, else None"},
    {"find_and_modify_success", find_and_modify_success_py, METH_VARARGS,
     "find_and_modify_success(buf, length) -> a plain success's outcome, else None"},
    {"write_success", write_success_py, METH_VARARGS,
     "write_success(buf, length) -> a plain success's outcome, else None"},
    {"register_write_check", register_write_check, METH_O,
     "register_write_check(cls): replies.WriteCheck, whose plain successes are read in C"},
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
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddStringConstant(m, "SOURCE_HASH", LOOP_SOURCE_HASH) < 0 ||
        common_init_module() < 0 || sources_init(m) < 0 || docs_init(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
