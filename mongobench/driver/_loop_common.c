/* What every compiled source shares (_loop_common.h's Common), for _loop_sources.c's keyed
 * sources and _loop_docs.c's inserts:
 *   - the draws: each operation's values as random.Random(index + 1).randrange(lo, hi) draws
 *     them (the generator's state copied; MT19937 and getrandbits as CPython's
 *     _randommodule.c), $in lists as queries.sample_distinct draws them, text as
 *     random.choices(alphabet, k=k) draws it;
 *   - the accounting: latency as LatencyRecorder.record keeps it, Counter and attribute
 *     increments, errors through multiplex.count_error, a check's call and its cached outcome;
 *   - the protocol: iterating a source yields (request, check) and send(outcome) takes the
 *     check's outcome, so the Python loop can drive it too (the tests compare them); the
 *     compiled loop calls the check itself (source_serve);
 *   - construction, garbage collection and deallocation of the common part. */

#include "_loop_common.h"

PyObject *k_runtime, *s_docs, *s_bytes;
static PyObject *s_latency, *s_tick, *s_pending_lat, *s_now, *s_stopped;

int mt_load(Mt *g, PyObject *state) {
    if (!PyTuple_Check(state) || PyTuple_GET_SIZE(state) != MT_N + 1) {
        PyErr_SetString(PyExc_ValueError, "not a generator's state (random.Random.getstate())");
        return -1;
    }
    for (int k = 0; k <= MT_N; k++) {
        unsigned long v = PyLong_AsUnsignedLong(PyTuple_GET_ITEM(state, k));
        if (v == (unsigned long)-1 && PyErr_Occurred()) return -1;
        if (k < MT_N) g->mt[k] = (uint32_t)v;
        else g->mti = (int)v;
    }
    return 0;
}

/* Random.randrange(lo, lo + width) for 0 < width < 2**32 (_randbelow_with_getrandbits) */
static long long mt_range(Common *s, int d) {
    uint32_t r;
    do {
        r = mt_next(&s->rng) >> (32 - s->bits[d]);
    } while (r >= s->width[d]);
    return s->lo[d] + (long long)r;
}

/* Random.random() (random_random) */
double mt_random(Common *s) {
    uint32_t a = mt_next(&s->rng) >> 5, b = mt_next(&s->rng) >> 6;
    return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0);
}

/* Whether another operation starts: 1 (counted in s->i), 0 when the source is done (the run
 * stopped, the quota reached), -1 with an exception set. */
int source_begin(Common *s) {
    PyObject *stopped = PyObject_GetAttr(s->run, s_stopped);
    if (stopped == NULL) return -1;
    int stop = PyObject_IsTrue(stopped);
    Py_DECREF(stopped);
    if (stop != 0) return stop < 0 ? -1 : 0;
    if (s->quota >= 0 && s->i >= s->quota) return 0;
    s->i++;
    return 1;
}

/* n distinct values of [lo, lo + width) into values d.. of req, as queries.sample_distinct
 * draws them where it does not sample (2 n <= width): batches of 64-bit words
 * (randbytes(8 k), k the values missing), each reduced mod width, repeats dropped */
static void mt_distinct(Common *s, int d, int n, char *req) {
    uint64_t seen[2 * MAX_DRAWS]; /* open addressing: offset + 1, 0 empty */
    memset(seen, 0, sizeof seen);
    uint32_t width = s->width[d];
    int count = 0;
    while (count < n) {
        for (int k = n - count; k > 0; k--) {
            uint64_t q = mt_next(&s->rng);
            q |= (uint64_t)mt_next(&s->rng) << 32;
            uint64_t v = q % width;
            size_t h = (size_t)(v * 0x9E3779B97F4A7C15ULL >> 56) % (2 * MAX_DRAWS);
            while (seen[h] && seen[h] != v + 1) h = (h + 1) % (2 * MAX_DRAWS);
            if (seen[h]) continue;
            seen[h] = v + 1;
            int64_t value = s->lo[d] + (int64_t)v;
            memcpy(req + s->at[d + count++], &value, 8);
        }
    }
}

/* n of the values of [lo, lo + width) into values d.. of req, as random.sample(range(lo, hi),
 * n) draws them where the width is below 2 n (a pool of the range: its list path) */
static void mt_sample(Common *s, int d, int n, char *req) {
    uint32_t pool[2 * MAX_DRAWS], m = s->width[d];
    for (uint32_t j = 0; j < m; j++) pool[j] = j;
    for (int i = 0; i < n; i++) {
        uint32_t below = m - (uint32_t)i, r;
        int bits = 0;
        for (uint32_t w = below; w; w >>= 1) bits++;
        do { /* _randbelow_with_getrandbits */
            r = mt_next(&s->rng) >> (32 - bits);
        } while (r >= below);
        int64_t value = s->lo[d] + (int64_t)pool[r];
        pool[r] = pool[below - 1];
        memcpy(req + s->at[d + i], &value, 8);
    }
}

/* The next operation's request filled: 1, 0 when the source is done, -1 (source_begin) */
int source_fill(Common *s) {
    int go = source_begin(s);
    if (go <= 0) return go;
    char *req = PyByteArray_AS_STRING(s->req);
    for (int d = 0; d < s->ndraws;) {
        if (s->text_k[d]) { /* random.choices(alphabet, k=k): floor(random() * n) each */
            char *out = req + s->at[d];
            double n = (double)s->width[d];
            for (int j = 0; j < s->text_k[d]; j++)
                out[j] = s->alpha[d][(Py_ssize_t)(mt_random(s) * n)];
            d++;
            continue;
        }
        if (s->list_n[d]) {
            if (2 * (uint32_t)s->list_n[d] > s->width[d]) mt_sample(s, d, s->list_n[d], req);
            else mt_distinct(s, d, s->list_n[d], req);
            d += s->list_n[d];
            continue;
        }
        int64_t v = (int64_t)mt_range(s, d);
        memcpy(req + s->at[d++], &v, 8); /* little-endian, as the wire */
    }
    s->t0 = clock_now();
    return 1;
}

/* d[key] += by (a Counter's item, missing as 0) */
int incr_item(PyObject *d, PyObject *key, long long by) {
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

int incr_attr(PyObject *o, PyObject *name, long long by) {
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

/* multiplex.count_error(stats, op, kind, message) */
int source_error(Common *s, PyObject *kind, PyObject *message) {
    PyObject *r = PyObject_CallFunctionObjArgs(s->count_error, s->stats, s->op, kind, message,
                                               NULL);
    Py_XDECREF(r);
    return r == NULL ? -1 : 0;
}

/* The operation's latency, as LatencyRecorder.record(op, micros) keeps it: the pending
 * Counter's item, in C when the recorder has no tick and a Counter for op (else its own
 * method, which makes them) */
int source_record(Common *s) {
    PyObject *now = PyObject_GetAttr(s->run, s_now);
    if (now == NULL) return -1;
    double micros = (PyFloat_AsDouble(now) - s->t0) * 1e6;
    Py_DECREF(now);
    if (PyErr_Occurred()) return -1;
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

PyObject *call_check(PyObject *check, PyObject *buf, Py_ssize_t length) {
    PyObject *len_obj = PyLong_FromSsize_t(length);
    if (len_obj == NULL) return NULL;
    PyObject *args[2] = {buf, len_obj};
    PyObject *out = PyObject_Vectorcall(check, args, 2, NULL);
    Py_DECREF(len_obj);
    if (out != NULL && (!PyTuple_Check(out) || PyTuple_GET_SIZE(out) < 4)) {
        Py_DECREF(out);
        PyErr_SetString(PyExc_TypeError, "a check's outcome is a tuple of 4 or more");
        return NULL;
    }
    return out;
}

static PyObject *write_check_type; /* replies.WriteCheck, registered when replies loads */

PyObject *register_write_check(PyObject *self, PyObject *cls) {
    if (!PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "register_write_check takes a class");
        return NULL;
    }
    Py_INCREF(cls);
    Py_XSETREF(write_check_type, cls);
    Py_RETURN_NONE;
}

int init_once(int initialised, const char *what) {
    if (!initialised) return 0;
    PyErr_Format(PyExc_RuntimeError, "%s: initialised already (make a new one)", what);
    return -1;
}

void last_reset(LastReply *last, PyObject *check) {
    /* exactly that class: a subclass may answer otherwise than write_success reads */
    last->write = write_check_type != NULL && (PyObject *)Py_TYPE(check) == write_check_type;
    last->len = 0;
    Py_CLEAR(last->out);
}

PyObject *cached_outcome(LastReply *last, PyObject *check, PyObject *buf, Py_ssize_t length) {
    const char *body = PyByteArray_AS_STRING(buf) + 16;
    Py_ssize_t n = length - 16;
    if (last->out != NULL && n == last->len && memcmp(body, last->body, (size_t)n) == 0) {
        Py_INCREF(last->out);
        return last->out;
    }
    PyObject *out = NULL;
    if (last->write) out = write_success((const unsigned char *)PyByteArray_AS_STRING(buf), length);
    if (out == NULL && !PyErr_Occurred()) out = call_check(check, buf, length);
    if (out != NULL && n <= LAST_MAX && PyTuple_GET_ITEM(out, 0) == Py_None) {
        memcpy(last->body, body, (size_t)n);
        last->len = n;
        Py_INCREF(out);
        Py_XSETREF(last->out, out);
    }
    return out;
}

/* -- the protocol: the next request (*req, *check: borrowed) after `out` (NULL: the
 * first). 1: send it, 0: the source is done, -1: an exception. */
static int source_next(PyObject *self, PyObject *out, PyObject **req, PyObject **check) {
    return ((Source *)self)->k.ops->next(self, out, req, check);
}

static PyObject *source_yield(PyObject *self, PyObject *out) {
    PyObject *req, *check;
    int r = source_next(self, out, &req, &check);
    if (r < 0) return NULL;
    if (r == 0) {
        if (out != NULL) PyErr_SetNone(PyExc_StopIteration);
        return NULL;
    }
    return PyTuple_Pack(2, req, check);
}

PyObject *source_iternext(PyObject *self) { return source_yield(self, NULL); }

static PyObject *source_send(PyObject *self, PyObject *out) {
    if (!PyTuple_Check(out) || PyTuple_GET_SIZE(out) < 4) {
        PyErr_SetString(PyExc_TypeError, "an outcome is a check's tuple");
        return NULL;
    }
    return source_yield(self, out);
}

static PyObject *source_close(PyObject *self, PyObject *unused) { Py_RETURN_NONE; }

/* The compiled loop's step for the reply in buf: its outcome, the accounting, the next
 * request (*req, borrowed). 1: send it, 0: the source is done, -1: an exception. */
int source_serve(PyObject *self, PyObject *buf, Py_ssize_t length, PyObject **req) {
    PyObject *check, *out = ((Source *)self)->k.ops->outcome(self, buf, length);
    if (out == NULL) return -1;
    int r = source_next(self, out, req, &check);
    Py_DECREF(out);
    return r;
}

/* every compiled source iterates so (its type's tp_iternext) */
int is_source(PyObject *o) { return Py_TYPE(o)->tp_iternext == source_iternext; }

/* -- construction: the common part. template: the request; draws: ((offset, lo, hi), ...)
 * in the order drawn, or (offset, alphabet bytes, k) for k letters at offset; state:
 * random.Random.getstate()[1]. 0, or -1 with an exception. */
int common_init(Common *s, const SourceOps *ops, Py_buffer *tmpl, int rid, PyObject *draws,
                PyObject *state, PyObject *check, PyObject *op, long long quota, PyObject *run,
                PyObject *stats, PyObject *count_error, PyObject *record) {
    Py_ssize_t nd = PyTuple_GET_SIZE(draws);
    if (tmpl->len < 16 || nd > MAX_DRAWS || PyTuple_GET_SIZE(state) != MT_N + 1) {
        PyErr_SetString(PyExc_ValueError, "compiled source: a template shorter than a header,"
                                          " too many values, or not a generator's state");
        return -1;
    }
    int d = 0; /* the values so far: a draw of n distinct ones fills n */
    for (Py_ssize_t e = 0; e < nd; e++) {
        PyObject *ats, *item = PyTuple_GET_ITEM(draws, e);
        long long lo, hi;
        if (PyTuple_Check(item) && PyTuple_GET_SIZE(item) == 3 &&
            PyBytes_Check(PyTuple_GET_ITEM(item, 1))) { /* (offset, alphabet, k): letters */
            Py_ssize_t at, k;
            const char *alpha;
            Py_ssize_t n;
            if (!PyArg_ParseTuple(item, "ny#n", &at, &alpha, &n, &k)) return -1;
            if (d >= MAX_DRAWS || n < 1 || n > UINT32_MAX || k < 1 || k > INT_MAX || at < 16 ||
                at > tmpl->len - k) {
                PyErr_SetString(PyExc_ValueError, "compiled source: more than 128 values, no"
                                                  " letters, or letters past the template");
                return -1;
            }
            s->at[d] = at;
            s->text_k[d] = (int)k;
            s->alpha[d] = alpha;
            s->width[d] = (uint32_t)n;
            s->list_n[d++] = 0;
            continue;
        }
        if (!PyArg_ParseTuple(item, "OLL", &ats, &lo, &hi)) return -1;
        int list = PyTuple_Check(ats);
        Py_ssize_t n = list ? PyTuple_GET_SIZE(ats) : 1;
        if (n < 1 || d + n > MAX_DRAWS || hi <= lo || (unsigned long long)(hi - lo) >> 32 ||
            (list && n > hi - lo)) {
            PyErr_SetString(PyExc_ValueError, "compiled source: more than 128 values, a range"
                                              " empty or of 2**32 or more, or more distinct"
                                              " values than their range holds");
            return -1;
        }
        for (Py_ssize_t j = 0; j < n; j++, d++) {
            Py_ssize_t at = PyLong_AsSsize_t(list ? PyTuple_GET_ITEM(ats, j) : ats);
            if (at == -1 && PyErr_Occurred()) return -1;
            if (at < 16 || at + 8 > tmpl->len) {
                PyErr_SetString(PyExc_ValueError, "compiled source: a value past the template");
                return -1;
            }
            s->at[d] = at;
            s->text_k[d] = 0;
            s->list_n[d] = list && j == 0 ? (int)n : 0;
            s->lo[d] = lo;
            s->width[d] = (uint32_t)(hi - lo);
            s->bits[d] = 0;
            for (uint32_t w = s->width[d]; w; w >>= 1) s->bits[d]++; /* width.bit_length() */
        }
    }
    s->ndraws = d;
    if (mt_load(&s->rng, state) < 0) return -1;
    s->ops = ops;
    PyObject *req = PyByteArray_FromStringAndSize(tmpl->buf, tmpl->len);
    if (req == NULL) return -1;
    memcpy(PyByteArray_AS_STRING(req) + 4, &rid, 4);
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
#define KEEP(name) Py_INCREF(name); Py_XSETREF(s->name, name);
    KEEP(draws) KEEP(check) KEEP(op) KEEP(run) KEEP(stats) KEEP(count_error) KEEP(record)
#undef KEEP
    s->quota = quota;
    s->i = 0;
    return 0;
}

int common_traverse(Common *s, visitproc visit, void *arg) {
    Py_VISIT(s->req); Py_VISIT(s->draws); Py_VISIT(s->check); Py_VISIT(s->op); Py_VISIT(s->run);
    Py_VISIT(s->stats); Py_VISIT(s->latency); Py_VISIT(s->counts); Py_VISIT(s->count_error);
    Py_VISIT(s->record);
    return 0;
}

void common_clear(Common *s) {
    Py_CLEAR(s->req); Py_CLEAR(s->draws); Py_CLEAR(s->check); Py_CLEAR(s->op); Py_CLEAR(s->run);
    Py_CLEAR(s->stats); Py_CLEAR(s->latency); Py_CLEAR(s->counts); Py_CLEAR(s->count_error);
    Py_CLEAR(s->record);
}

void source_dealloc(PyObject *self) {
    PyObject_GC_UnTrack(self);
    Py_TYPE(self)->tp_clear(self);
    Py_TYPE(self)->tp_free(self);
}

PyMethodDef source_methods[] = {
    {"send", source_send, METH_O, "send(outcome) -> the next (request, check)"},
    {"close", source_close, METH_NOARGS, "nothing to release"},
    {NULL, NULL, 0, NULL},
};

int common_init_module(void) {
#define INTERN(var, text) \
    if ((var = PyUnicode_InternFromString(text)) == NULL) return -1;
    INTERN(s_now, "now");
    INTERN(s_stopped, "stopped");
    INTERN(s_latency, "latency");
    INTERN(s_tick, "tick");
    INTERN(s_pending_lat, "_pending");
    INTERN(s_docs, "docs");
    INTERN(s_bytes, "bytes");
    INTERN(k_runtime, "RuntimeError");
#undef INTERN
    return 0;
}
