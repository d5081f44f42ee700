/* Sources in C for the compiled loop, so it serves their clients with no bytecode per
 * operation. Each is the twin of a Python source (the reference, run everywhere else):
 *   KeyedWrites  sources._writes of a keyed write without a document (sources.executor),
 *                and sources._deletes (each client's keys in order);
 *   KeyedReads   cursor_sources._finder of a find or aggregate with uniform integer values,
 *                its getMores included;
 *   KeyedUpserts sources._upsert (update_one or findAndModify of a fresh document, and the
 *                insert of that document on a miss without upsert).
 * Each keeps its Python source's contract:
 *   - the same requests: the template with the client's request id, each operation's values
 *     drawn as its Python source draws them, in the same order (_loop_common.c's draws);
 *   - the same accounting, on the same objects: latency (LatencyRecorder._pending, whole
 *     microseconds from the operation's fill to the wake-up that read its last reply),
 *     stats.ops, docs, bytes, counters, and errors through multiplex.count_error;
 *   - the same protocol (_loop_common.c's): iterating one yields (request, check) and
 *     send(outcome) takes the check's outcome.
 * KeyedWrites skips the check for a reply whose bytes equal the last success's (the check is
 * a function of those bytes). */

#include "_loop_common.h"

static PyObject *s_getmores, *s_fallback, *s_new_keys, *s_existing_keys;

#define MAX_FIELDS 16 /* a record statement's values */
#define MAX_SHAPES 19 /* a text field's digits: 1..19 */

typedef struct {
    PyObject_HEAD
    Common k;
    int field; /* the outcome's field of the documents written (1: n, 2: nModified) */
    int has_expect;
    long long expect, size;
    LastReply last;
    PyObject *expect_msg;
    /* deletes (sources._deletes): the keys [next, stop) in steps of per, [lo, hi) each
     * (at lo_at, hi_at: -1 for one key), fewer documents than keys an error (short_*) */
    long long next, stop, per, lo, hi;
    Py_ssize_t lo_at, hi_at;
    PyObject *short_op, *short_msg;
    PyObject *docs; /* a replacement's DocWriter: a fresh document of the key at doc_at */
    Py_ssize_t doc_at;
    /* records (sources.records): the records [next, stop), one statement each: its fields
     * (writes.Field) written into the request of the shape the text field's number of
     * digits picks (shape 0 without a text field) */
    PyObject *shapes; /* a tuple of bytearrays, the requests; NULL: not records */
    int nfields, text; /* text: the text field's index, -1 without one */
    int kind[MAX_FIELDS]; /* 0: int32, 1: digits of a text, 2: the time, a double */
    long long div[MAX_FIELDS], mod[MAX_FIELDS];
    Py_ssize_t field_at[MAX_SHAPES][MAX_FIELDS];
} KeyedWrites;

typedef struct {
    PyObject_HEAD
    Common k;
    PyObject *gm, *gm_check, *counters; /* the getMore request (id, batchSize) */
    Py_ssize_t gm_id_at, gm_size_at; /* gm_size_at -1: no batchSize */
    long long limit, expect; /* expect -1: any number of documents */
    long long got, more; /* the operation's documents and getMores so far */
    char first_batch[16], next_batch[16]; /* the checks' batch names ("": no fast check) */
} KeyedReads;

typedef struct { /* sources._upsert: draws (key, is new) itself; Common's draws unused */
    PyObject_HEAD
    Common k;
    PyObject *write_doc; /* the client's DocFactory's write, or its DocWriter */
    PyObject *ins, *ins_check, *counters, *missed_msg; /* the fallback insert, its check */
    LastReply last[2]; /* update_one's last success, the insert's */
    Py_ssize_t key_at, doc_at, ins_at, doc_size;
    uint32_t keys;
    int bits, update_one, upsert, inserting, is_new;
    double pct;
    long long base;
} KeyedUpserts;

/* -- KeyedWrites: what sources._writes does with an outcome; 0, or -1 with an exception */
static int writes_account(KeyedWrites *w, PyObject *out) {
    Common *s = &w->k;
    if (PyTuple_GET_SIZE(out) < 5) { /* the message and the counts are read below */
        PyErr_SetString(PyExc_TypeError, "a write check's outcome is a tuple of 6");
        return -1;
    }
    PyObject *kind = PyTuple_GET_ITEM(out, 0);
    if (kind != Py_None) return source_error(s, kind, PyTuple_GET_ITEM(out, 4));
    if (source_record(s) < 0) return -1;
    long long n = 1;
    if (w->field) {
        n = PyLong_AsLongLong(PyTuple_GET_ITEM(out, w->field));
        if (n == -1 && PyErr_Occurred()) return -1;
    }
    if (w->has_expect && n != w->expect) return source_error(s, k_runtime, w->expect_msg);
    if (incr_item(s->counts, s->op, 1) < 0 || incr_attr(s->stats, s_docs, n) < 0) return -1;
    if (w->per && n != w->hi - w->lo) { /* a delete short of its keys: one error a key */
        PyObject *missing = PyLong_FromLongLong(w->hi - w->lo - n);
        if (missing == NULL) return -1;
        PyObject *r = PyObject_CallFunctionObjArgs(s->count_error, s->stats, w->short_op,
                                                   k_runtime, w->short_msg, missing, NULL);
        Py_DECREF(missing);
        Py_XDECREF(r);
        if (r == NULL) return -1;
    }
    return w->size ? incr_attr(s->stats, s_bytes, w->size * n) : 0;
}

/* A delete's next keys into the request: 1, or 0 when the client's keys are done */
static int writes_step(KeyedWrites *w) {
    if (w->next >= w->stop) return 0;
    w->lo = w->next;
    w->hi = w->lo + w->per < w->stop ? w->lo + w->per : w->stop;
    w->next = w->lo + w->per;
    char *req = PyByteArray_AS_STRING(w->k.req);
    memcpy(req + w->lo_at, &w->lo, 8);
    if (w->hi_at >= 0) memcpy(req + w->hi_at, &w->hi, 8);
    return 1;
}

/* A record's field value: (record // div) % mod (mod 0: none) */
static long long record_value(KeyedWrites *w, int f, long long rec) {
    long long v = rec / w->div[f];
    return w->mod[f] ? v % w->mod[f] : v;
}

/* The next record's statement, as writes.Records.statement makes it, into the request of
 * its shape (*req): 1, or 0 when the client's records are done */
static int records_fill(KeyedWrites *w, PyObject **req) {
    if (w->next >= w->stop) return 0;
    long long rec = w->next++;
    char digits[24];
    int nd = 0;
    if (w->text >= 0) nd = snprintf(digits, sizeof digits, "%lld", record_value(w, w->text, rec));
    int shape = nd ? nd - 1 : 0;
    if (shape >= PyTuple_GET_SIZE(w->shapes)) { /* refused when made: cannot happen */
        PyErr_SetString(PyExc_RuntimeError, "KeyedWrites: a record without its shape");
        return -1;
    }
    *req = PyTuple_GET_ITEM(w->shapes, shape);
    char *out = PyByteArray_AS_STRING(*req);
    for (int f = 0; f < w->nfields; f++) {
        Py_ssize_t at = w->field_at[shape][f];
        if (w->kind[f] == 0) {
            int32_t v = (int32_t)record_value(w, f, rec);
            memcpy(out + at, &v, 4);
        } else if (w->kind[f] == 1) {
            memcpy(out + at, digits, (size_t)nd);
        } else {
            struct timespec ts; /* time.time(): the system clock */
            clock_gettime(CLOCK_REALTIME, &ts);
            double now = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
            memcpy(out + at, &now, 8);
        }
    }
    return 1;
}

static PyObject *writes_outcome(PyObject *self, PyObject *buf, Py_ssize_t length) {
    KeyedWrites *w = (KeyedWrites *)self;
    return cached_outcome(&w->last, w->k.check, buf, length);
}

/* -- KeyedReads: what cursor_sources._finder does with an outcome. 1: a getMore is due
 * (filled), 0: the operation is done (counted), -1: an exception. */
static int reads_account(KeyedReads *r, PyObject *out) {
    Common *s = &r->k;
    PyObject *kind = PyTuple_GET_ITEM(out, 0);
    int failed = kind != Py_None;
    if (!failed) {
        long long n = PyLong_AsLongLong(PyTuple_GET_ITEM(out, 1));
        long long cid = PyLong_AsLongLong(PyTuple_GET_ITEM(out, 2));
        if (PyErr_Occurred()) return -1;
        r->got += n;
        if (cid) { /* the cursor stays open: its getMore (_get_mores) */
            char *gm = PyByteArray_AS_STRING(r->gm);
            memcpy(gm + r->gm_id_at, &cid, 8);
            if (r->gm_size_at >= 0) {
                long long size = r->limit - r->got;
                memcpy(gm + r->gm_size_at, &size, 8);
            }
            r->more++;
            return 1;
        }
    }
    long long got = r->got, more = r->more;
    r->got = r->more = 0;
    if (incr_item(r->counters, s_getmores, more) < 0) return -1;
    if (failed) return source_error(s, kind, PyTuple_GET_ITEM(out, 3));
    if (source_record(s) < 0 || incr_attr(s->stats, s_docs, got) < 0) return -1;
    if (r->expect >= 0 && got != r->expect) {
        PyObject *m = PyUnicode_FromFormat("%lld documents instead of %lld", got, r->expect);
        if (m == NULL) return -1;
        int e = source_error(s, k_runtime, m);
        Py_DECREF(m);
        return e;
    }
    return incr_item(s->counts, s->op, 1);
}

/* -- KeyedUpserts: operation i's (key, is new) as KeyedUpsert.draw, the statement with a
 * fresh document of that _id (docs.write), then the clock, as sources._upsert */
static int upserts_fill(KeyedUpserts *u) {
    Common *s = &u->k;
    int go = source_begin(s);
    if (go <= 0) return go;
    long long i = s->i - 1, key;
    u->is_new = u->pct > 0 && mt_random(s) * 100 < u->pct;
    if (u->is_new) {
        key = u->base + i;
    } else {
        uint32_t r;
        do {
            r = mt_next(&s->rng) >> (32 - u->bits);
        } while (r >= u->keys);
        key = r;
    }
    memcpy(PyByteArray_AS_STRING(s->req) + u->key_at, &key, 8);
    if (is_doc_writer(u->write_doc)) {
        if (doc_write(u->write_doc, PyByteArray_AS_STRING(s->req) + u->doc_at, 1, key) < 0)
            return -1;
    } else {
        PyObject *r = PyObject_CallFunction(u->write_doc, "Onn(L)", s->req, u->doc_at,
                                            (Py_ssize_t)1, key);
        if (r == NULL) return -1;
        Py_DECREF(r);
    }
    s->t0 = clock_now();
    return 1;
}

/* What sources._upsert does with an outcome: 1 when the fallback insert is due (filled),
 * 0 when the operation is done, -1 with an exception set */
static int upserts_account(KeyedUpserts *u, PyObject *out) {
    Common *s = &u->k;
    PyObject *kind = PyTuple_GET_ITEM(out, 0);
    if (kind != Py_None) { /* the fallback insert's message is field 4, as update_one's */
        int at = u->inserting || u->update_one ? 4 : 3;
        u->inserting = 0;
        if (PyTuple_GET_SIZE(out) <= at) {
            PyErr_SetString(PyExc_TypeError, "a write check's outcome is a tuple of 6");
            return -1;
        }
        return source_error(s, kind, PyTuple_GET_ITEM(out, at));
    }
    if (u->inserting) {
        u->inserting = 0;
        if (incr_item(u->counters, s_fallback, 1) < 0) return -1;
    } else {
        int missed;
        if (u->update_one) {
            long long n = PyLong_AsLongLong(PyTuple_GET_ITEM(out, 1));
            long long up = PyLong_AsLongLong(PyTuple_GET_ITEM(out, 3));
            if (PyErr_Occurred()) return -1;
            missed = n == 0 && up == 0;
        } else {
            int found = PyObject_IsTrue(PyTuple_GET_ITEM(out, 1));
            if (found < 0) return -1;
            missed = !found;
        }
        if (missed && !u->upsert) { /* the document the statement carried, inserted */
            char *ins = PyByteArray_AS_STRING(u->ins);
            memcpy(ins + u->ins_at, PyByteArray_AS_STRING(s->req) + u->doc_at,
                   (size_t)u->doc_size);
            u->inserting = 1;
            return 1;
        }
        if (missed) return source_error(s, k_runtime, u->missed_msg);
    }
    if (source_record(s) < 0 || incr_item(s->counts, s->op, 1) < 0) return -1;
    if (incr_item(u->counters, u->is_new ? s_new_keys : s_existing_keys, 1) < 0) return -1;
    return incr_attr(s->stats, s_docs, 1);
}

static int upserts_next(PyObject *self, PyObject *out, PyObject **req, PyObject **check) {
    KeyedUpserts *u = (KeyedUpserts *)self;
    int r = out != NULL ? upserts_account(u, out) : 0;
    if (r == 1) {
        *req = u->ins;
        *check = u->ins_check;
        return 1;
    }
    r = r < 0 ? -1 : upserts_fill(u);
    *req = u->k.req;
    *check = u->k.check;
    return r;
}

static int reads_next(PyObject *self, PyObject *out, PyObject **req, PyObject **check) {
    KeyedReads *r = (KeyedReads *)self;
    if (out != NULL) {
        int more = reads_account(r, out);
        if (more < 0) return -1;
        if (more) {
            *req = r->gm;
            *check = r->gm_check;
            return 1;
        }
    }
    *req = r->k.req;
    *check = r->k.check;
    return source_fill(&r->k);
}

static int writes_next(PyObject *self, PyObject *out, PyObject **req, PyObject **check) {
    KeyedWrites *w = (KeyedWrites *)self;
    if (out != NULL && writes_account(w, out) < 0) return -1;
    *req = w->k.req;
    *check = w->k.check;
    int r = source_fill(&w->k);
    if (r == 1 && w->shapes != NULL) { /* as sources.records' fill: before the clock */
        r = records_fill(w, req);
        w->k.t0 = clock_now();
        return r;
    }
    if (r == 1 && w->docs != NULL) { /* as sources.executor's fill: before the clock */
        char *req = PyByteArray_AS_STRING(w->k.req);
        int64_t key;
        memcpy(&key, req + w->k.at[0], 8);
        if (doc_write(w->docs, req + w->doc_at, 1, key) < 0) return -1;
        w->k.t0 = clock_now();
    }
    return r == 1 && w->per ? writes_step(w) : r;
}

/* update_one's and the insert's replies as KeyedWrites' (the last success's bytes); a
 * findAndModify's plain success read here, anything else by its check */
static PyObject *upserts_outcome(PyObject *self, PyObject *buf, Py_ssize_t length) {
    KeyedUpserts *u = (KeyedUpserts *)self;
    if (u->inserting) return cached_outcome(&u->last[1], u->ins_check, buf, length);
    if (u->update_one) return cached_outcome(&u->last[0], u->k.check, buf, length);
    PyObject *out = find_and_modify_success(
        (const unsigned char *)PyByteArray_AS_STRING(buf), length);
    return out != NULL || PyErr_Occurred() ? out : call_check(u->k.check, buf, length);
}

/* a plain success checked here, anything else by its check */
static PyObject *reads_outcome(PyObject *self, PyObject *buf, Py_ssize_t length) {
    KeyedReads *r = (KeyedReads *)self;
    const char *batch = r->more ? r->next_batch : r->first_batch;
    PyObject *out = batch[0] ? cursor_success((const unsigned char *)PyByteArray_AS_STRING(buf),
                                              length, batch)
                             : NULL;
    if (out == NULL && !PyErr_Occurred())
        out = call_check(r->more ? r->gm_check : r->k.check, buf, length);
    return out;
}

static const SourceOps writes_ops = {writes_next, writes_outcome};
static const SourceOps reads_ops = {reads_next, reads_outcome};
static const SourceOps upserts_ops = {upserts_next, upserts_outcome};

/* records=(start, stop, kinds, divs, mods, shapes): shapes ((request, offsets), ...), the
 * k-th for a text of k + 1 digits; 0, or -1 with an exception */
static int records_init(KeyedWrites *w, PyObject *spec, int rid) {
    long long start, stop;
    PyObject *kinds, *divs, *mods, *shapes;
    if (!PyArg_ParseTuple(spec, "LLO!O!O!O!", &start, &stop, &PyTuple_Type, &kinds,
                          &PyTuple_Type, &divs, &PyTuple_Type, &mods, &PyTuple_Type, &shapes))
        return -1;
    Py_ssize_t nf = PyTuple_GET_SIZE(kinds), ns = PyTuple_GET_SIZE(shapes);
    int bad = nf < 1 || nf > MAX_FIELDS || PyTuple_GET_SIZE(divs) != nf ||
              PyTuple_GET_SIZE(mods) != nf || ns < 1 || ns > MAX_SHAPES || start < 0 ||
              stop < start;
    int text = -1;
    for (Py_ssize_t f = 0; !bad && f < nf; f++) {
        long kind = PyLong_AsLong(PyTuple_GET_ITEM(kinds, f));
        long long div = PyLong_AsLongLong(PyTuple_GET_ITEM(divs, f));
        long long mod = PyLong_AsLongLong(PyTuple_GET_ITEM(mods, f));
        if (PyErr_Occurred()) return -1;
        /* the largest value of the client's records: an int32's range, a text's shape */
        long long top = mod ? mod - 1 : (stop > start ? (stop - 1) / (div > 0 ? div : 1) : 0);
        char digits[24];
        bad = kind < 0 || kind > 2 || div < 1 || mod < 0 || (kind == 0 && top > INT32_MAX) ||
              (kind == 1 &&
               (text >= 0 || !mod || snprintf(digits, sizeof digits, "%lld", top) > ns));
        if (kind == 1) text = (int)f;
        w->kind[f] = (int)kind;
        w->div[f] = div;
        w->mod[f] = mod;
    }
    if (!bad && text < 0 && ns != 1) bad = 1;
    PyObject *reqs = bad ? NULL : PyTuple_New(ns);
    for (Py_ssize_t j = 0; reqs != NULL && j < ns; j++) {
        const char *raw;
        Py_ssize_t len;
        PyObject *ats;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(shapes, j), "y#O!", &raw, &len, &PyTuple_Type,
                              &ats) || PyTuple_GET_SIZE(ats) != nf) {
            Py_CLEAR(reqs);
            break;
        }
        for (Py_ssize_t f = 0; f < nf; f++) {
            Py_ssize_t at = PyLong_AsSsize_t(PyTuple_GET_ITEM(ats, f));
            Py_ssize_t width = w->kind[f] == 0 ? 4 : w->kind[f] == 1 ? j + 1 : 8;
            if (at < 16 || at > len - width) {
                Py_CLEAR(reqs);
                break;
            }
            w->field_at[j][f] = at;
        }
        PyObject *req = reqs == NULL ? NULL : PyByteArray_FromStringAndSize(raw, len);
        if (req == NULL) {
            Py_CLEAR(reqs);
            break;
        }
        memcpy(PyByteArray_AS_STRING(req) + 4, &rid, 4);
        PyTuple_SET_ITEM(reqs, j, req);
    }
    if (reqs == NULL) {
        if (!PyErr_Occurred() || PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            PyErr_SetString(PyExc_ValueError, "KeyedWrites: records (start, stop, kinds 0..2,"
                                              " divs >= 1, mods >= 0, shapes of (request,"
                                              " offsets)): int32 values, one text with a"
                                              " shape for each of its lengths, offsets in"
                                              " their request");
        }
        return -1;
    }
    Py_XSETREF(w->shapes, reqs);
    w->nfields = (int)nf;
    w->text = text;
    w->next = start;
    w->stop = stop;
    return 0;
}

static int writes_init(PyObject *self, PyObject *a, PyObject *kw) {
    KeyedWrites *w = (KeyedWrites *)self;
    if (init_once(w->k.ops != NULL, "KeyedWrites") < 0) return -1;
    static char *names[] = {COMMON_NAMES, "field", "expect", "expect_msg", "size", "steps",
                            "short_op", "short_msg", "docs", "doc_at", "records", NULL};
    COMMON_DECL
    long long expect, size, start = 0, stop = 0, per = 0;
    Py_ssize_t lo_at = -1, hi_at = -1, doc_at = -1;
    PyObject *expect_msg, *steps = Py_None, *short_op = Py_None, *short_msg = Py_None;
    PyObject *docs = Py_None, *records = Py_None;
    if (!PyArg_ParseTupleAndKeywords(a, kw, COMMON_FORMAT "iLOL|OOOOnO", names, COMMON_ARGS(),
                                     &w->field, &expect, &expect_msg, &size, &steps, &short_op,
                                     &short_msg, &docs, &doc_at, &records))
        return -1;
    if (records != Py_None &&
        (steps != Py_None || docs != Py_None || PyTuple_GET_SIZE(draws) || quota >= 0)) {
        PyErr_SetString(PyExc_ValueError, "KeyedWrites: records without steps, a document,"
                                          " draws or quota");
        PyBuffer_Release(&tmpl);
        return -1;
    }
    if (docs != Py_None &&
        (!is_doc_writer(docs) || PyTuple_GET_SIZE(draws) != 1 || steps != Py_None ||
         doc_at < 16 || doc_at + doc_size(docs) > tmpl.len)) {
        PyErr_SetString(PyExc_ValueError, "KeyedWrites: a document (a DocWriter) at doc_at in"
                                          " the template, with one value (its key), no steps");
        PyBuffer_Release(&tmpl);
        return -1;
    }
    int r = steps == Py_None ||
                    PyArg_ParseTuple(steps, "LLLnn", &start, &stop, &per, &lo_at, &hi_at)
                ? 0
                : -1;
    if (r == 0 && (w->field < 0 || w->field > 4 ||
                   (steps != Py_None &&
                    (per < 1 || lo_at < 16 || lo_at + 8 > tmpl.len || hi_at + 8 > tmpl.len ||
                     (hi_at >= 0 && hi_at < 16) || PyTuple_GET_SIZE(draws) || quota >= 0 ||
                     short_op == Py_None)))) {
        PyErr_SetString(PyExc_ValueError, "KeyedWrites: field 0..4; steps (start, stop, per,"
                                          " lo_at, hi_at) in the template, without draws,"
                                          " quota or short_op");
        r = -1;
    }
    if (r == 0) r = COMMON_INIT(&w->k, &writes_ops);
    PyBuffer_Release(&tmpl);
    if (r < 0) return -1;
    w->next = start;
    w->stop = stop;
    w->per = steps == Py_None ? 0 : per;
    w->lo_at = lo_at;
    w->hi_at = hi_at;
    Py_INCREF(short_op);
    Py_XSETREF(w->short_op, short_op);
    Py_INCREF(short_msg);
    Py_XSETREF(w->short_msg, short_msg);
    Py_INCREF(expect_msg);
    Py_XSETREF(w->expect_msg, expect_msg);
    if (docs == Py_None) {
        Py_CLEAR(w->docs);
    } else {
        Py_INCREF(docs);
        Py_XSETREF(w->docs, docs);
    }
    w->doc_at = doc_at;
    w->has_expect = expect_msg != Py_None;
    w->expect = expect;
    w->size = size;
    Py_CLEAR(w->shapes);
    last_reset(&w->last, w->k.check);
    return records == Py_None ? 0 : records_init(w, records, rid);
}

/* A CursorCheck's batch name (its `batch`) into out[16]: "" for a check without one */
static int batch_name(PyObject *check, char *out) {
    out[0] = 0;
    PyObject *name = PyObject_GetAttrString(check, "batch");
    if (name == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
        PyErr_Clear();
        return 0;
    }
    if (PyBytes_Check(name) && PyBytes_GET_SIZE(name) < 16 &&
        strlen(PyBytes_AS_STRING(name)) == (size_t)PyBytes_GET_SIZE(name))
        memcpy(out, PyBytes_AS_STRING(name), (size_t)PyBytes_GET_SIZE(name) + 1);
    Py_DECREF(name);
    return 0;
}

static int reads_init(PyObject *self, PyObject *a, PyObject *kw) {
    KeyedReads *r = (KeyedReads *)self;
    if (init_once(r->k.ops != NULL, "KeyedReads") < 0) return -1;
    static char *names[] = {COMMON_NAMES, "get_more", "id_at", "size_at", "get_more_check",
                            "counters", "limit", "expect", NULL};
    COMMON_DECL
    Py_buffer gm;
    Py_ssize_t id_at, size_at;
    long long limit, expect;
    PyObject *gm_check, *counters;
    if (!PyArg_ParseTupleAndKeywords(a, kw, COMMON_FORMAT "y*nnOO!LL", names, COMMON_ARGS(),
                                     &gm, &id_at, &size_at, &gm_check, &PyDict_Type, &counters,
                                     &limit, &expect))
        return -1;
    int bad = id_at < 16 || id_at + 8 > gm.len || size_at + 8 > gm.len ||
              (size_at >= 0 && size_at < 16) || (size_at >= 0 && limit <= 0);
    PyObject *req = bad ? NULL : PyByteArray_FromStringAndSize(gm.buf, gm.len);
    int ok = req != NULL && COMMON_INIT(&r->k, &reads_ops) == 0;
    PyBuffer_Release(&tmpl);
    PyBuffer_Release(&gm);
    if (!ok) {
        Py_XDECREF(req);
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "KeyedReads: a getMore's id or batchSize past its"
                                              " template, or a batchSize without a limit");
        return -1;
    }
    memcpy(PyByteArray_AS_STRING(req) + 4, &rid, 4);
    Py_XSETREF(r->gm, req);
    Py_INCREF(gm_check);
    Py_XSETREF(r->gm_check, gm_check);
    Py_INCREF(counters);
    Py_XSETREF(r->counters, counters);
    if (batch_name(check, r->first_batch) < 0 || batch_name(gm_check, r->next_batch) < 0)
        return -1;
    r->gm_id_at = id_at;
    r->gm_size_at = size_at;
    r->limit = limit;
    r->expect = expect;
    r->got = r->more = 0;
    return 0;
}

static int upserts_init(PyObject *self, PyObject *a, PyObject *kw) {
    KeyedUpserts *u = (KeyedUpserts *)self;
    if (init_once(u->k.ops != NULL, "KeyedUpserts") < 0) return -1;
    static char *names[] = {COMMON_NAMES, "key_at", "keys", "percent_new", "base", "write_doc",
                            "doc_at", "doc_size", "update_one", "upsert", "insert", "ins_at",
                            "insert_check", "counters", "missed_msg", NULL};
    COMMON_DECL
    Py_buffer ins;
    Py_ssize_t key_at, doc_at, doc_size, ins_at;
    unsigned long long keys;
    long long base;
    double pct;
    int update_one, upsert;
    PyObject *write_doc, *ins_check, *counters, *missed_msg;
    if (!PyArg_ParseTupleAndKeywords(a, kw, COMMON_FORMAT "nKdLOnnppy*nOO!O", names,
                                     COMMON_ARGS(), &key_at, &keys, &pct, &base, &write_doc,
                                     &doc_at, &doc_size, &update_one, &upsert, &ins, &ins_at,
                                     &ins_check, &PyDict_Type, &counters, &missed_msg))
        return -1;
    Py_ssize_t len = tmpl.len;
    int bad = keys == 0 || keys >> 32 || key_at < 16 || key_at + 8 > len || doc_at < 16 ||
              doc_size < 5 || doc_at + doc_size > len || ins_at < 16 ||
              ins_at + doc_size > ins.len || PyTuple_GET_SIZE(draws);
    PyObject *req = bad ? NULL : PyByteArray_FromStringAndSize(ins.buf, ins.len);
    int ok = req != NULL && COMMON_INIT(&u->k, &upserts_ops) == 0;
    PyBuffer_Release(&tmpl);
    PyBuffer_Release(&ins);
    if (!ok) {
        Py_XDECREF(req);
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "KeyedUpserts: keys outside (0, 2**32), draws, or"
                                              " a key or document past its template");
        return -1;
    }
    memcpy(PyByteArray_AS_STRING(req) + 4, &rid, 4);
    Py_XSETREF(u->ins, req);
#define KEEP(name) Py_INCREF(name); Py_XSETREF(u->name, name);
    KEEP(write_doc) KEEP(ins_check) KEEP(counters) KEEP(missed_msg)
#undef KEEP
    u->key_at = key_at;
    u->doc_at = doc_at;
    u->doc_size = doc_size;
    u->ins_at = ins_at;
    u->keys = (uint32_t)keys;
    u->bits = 0;
    for (unsigned long long w = keys; w; w >>= 1) u->bits++; /* keys.bit_length() */
    u->pct = pct;
    u->base = base;
    u->update_one = update_one;
    u->upsert = upsert;
    u->inserting = u->is_new = 0;
    last_reset(&u->last[0], u->k.check);
    last_reset(&u->last[1], u->ins_check);
    return 0;
}

static int writes_traverse(PyObject *self, visitproc visit, void *arg) {
    KeyedWrites *w = (KeyedWrites *)self;
    Py_VISIT(w->last.out); Py_VISIT(w->expect_msg); Py_VISIT(w->short_op); Py_VISIT(w->docs);
    Py_VISIT(w->short_msg); Py_VISIT(w->shapes);
    return common_traverse(&w->k, visit, arg);
}

static int writes_clear(PyObject *self) {
    KeyedWrites *w = (KeyedWrites *)self;
    Py_CLEAR(w->last.out); Py_CLEAR(w->expect_msg); Py_CLEAR(w->short_op); Py_CLEAR(w->docs);
    Py_CLEAR(w->short_msg); Py_CLEAR(w->shapes);
    common_clear(&w->k);
    return 0;
}

static int reads_traverse(PyObject *self, visitproc visit, void *arg) {
    KeyedReads *r = (KeyedReads *)self;
    Py_VISIT(r->gm); Py_VISIT(r->gm_check); Py_VISIT(r->counters);
    return common_traverse(&r->k, visit, arg);
}

static int reads_clear(PyObject *self) {
    KeyedReads *r = (KeyedReads *)self;
    Py_CLEAR(r->gm); Py_CLEAR(r->gm_check); Py_CLEAR(r->counters);
    common_clear(&r->k);
    return 0;
}

static int upserts_traverse(PyObject *self, visitproc visit, void *arg) {
    KeyedUpserts *u = (KeyedUpserts *)self;
    Py_VISIT(u->write_doc); Py_VISIT(u->ins); Py_VISIT(u->ins_check); Py_VISIT(u->counters);
    Py_VISIT(u->missed_msg); Py_VISIT(u->last[0].out); Py_VISIT(u->last[1].out);
    return common_traverse(&u->k, visit, arg);
}

static int upserts_clear(PyObject *self) {
    KeyedUpserts *u = (KeyedUpserts *)self;
    Py_CLEAR(u->write_doc); Py_CLEAR(u->ins); Py_CLEAR(u->ins_check); Py_CLEAR(u->counters);
    Py_CLEAR(u->missed_msg); Py_CLEAR(u->last[0].out); Py_CLEAR(u->last[1].out);
    common_clear(&u->k);
    return 0;
}

SOURCE_TYPE(KeyedWritesType, "KeyedWrites", KeyedWrites,
            "sources._writes of a keyed write without a document, in C",
            writes_init, writes_traverse, writes_clear);

SOURCE_TYPE(KeyedReadsType, "KeyedReads", KeyedReads,
            "cursor_sources._finder of uniform integer values, its getMores too, in C",
            reads_init, reads_traverse, reads_clear);

SOURCE_TYPE(KeyedUpsertsType, "KeyedUpserts", KeyedUpserts,
            "sources._upsert (update_one or findAndModify, the fallback insert), in C",
            upserts_init, upserts_traverse, upserts_clear);

int sources_init(PyObject *m) {
#define INTERN(var, text) \
    if ((var = PyUnicode_InternFromString(text)) == NULL) return -1;
    INTERN(s_getmores, "getmores");
    INTERN(s_fallback, "fallback_inserts");
    INTERN(s_new_keys, "new_keys");
    INTERN(s_existing_keys, "existing_keys");
#undef INTERN
    if (PyType_Ready(&KeyedWritesType) < 0 || PyType_Ready(&KeyedReadsType) < 0 ||
        PyType_Ready(&KeyedUpsertsType) < 0)
        return -1;
    if (PyModule_AddObjectRef(m, "KeyedWrites", (PyObject *)&KeyedWritesType) < 0 ||
        PyModule_AddObjectRef(m, "KeyedReads", (PyObject *)&KeyedReadsType) < 0 ||
        PyModule_AddObjectRef(m, "KeyedUpserts", (PyObject *)&KeyedUpsertsType) < 0)
        return -1;
    return 0;
}
