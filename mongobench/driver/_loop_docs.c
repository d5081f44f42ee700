/* Documents and the inserts' source in C, each the twin of its Python reference:
 *   DocWriter  docgen.DocFactory.write: the same bytes for the same calls (its template,
 *              pool of bodies and generator taken over from a factory when made);
 *   Inserts    sources.inserts: each batch's messages (a document sequence, split at
 *              per_msg documents as insert_many splits), the same accounting of every
 *              outcome (bulk write errors per document), the audit's sampled _ids.
 * A DocWriter replaces its factory: the factory's generator is not advanced by it, so a
 * client uses one or the other. */

#include "_loop_common.h"

#include <time.h>

#define MAX_INTS 64
#define ACCOUNTS 20000
#define SEQ_LIMIT (1 << 20)
#define MAX_SIZES 4

enum { ID_OBJECTID, ID_UUID, ID_BUSINESS, ID_SERIAL };

typedef struct {
    PyObject_HEAD
    char *raw; /* the template document */
    Py_ssize_t size, id_off, body_at; /* body_at: where the pool's body goes */
    int kind, n_ints;
    Py_ssize_t int_offs[MAX_INTS];
    uint32_t int_range;
    PyObject *bodies; /* the factory's pool, a list of `n_bodies` bytes (twice over) */
    Py_ssize_t n_bodies, at;
    Mt rng;
    uint32_t oid_counter;
    unsigned char oid_rand[5];
    uint32_t *account_seq, lane;
    uint32_t *scratch; /* a batch's draws (doc_write) */
    Py_ssize_t scratch_len;
} DocWriter;

static PyTypeObject DocWriterType;

int is_doc_writer(PyObject *o) { return Py_IS_TYPE(o, &DocWriterType); }

static void be32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

/* The scratch words for n documents' draws, grown as needed (malloc: no GIL needed). */
static uint32_t *scratch(DocWriter *w, Py_ssize_t words) {
    if (words > w->scratch_len) {
        uint32_t *p = realloc(w->scratch, (size_t)words * sizeof(uint32_t));
        if (p == NULL) {
            PyErr_NoMemory();
            return NULL;
        }
        w->scratch = p;
        w->scratch_len = words;
    }
    return w->scratch;
}

static const char HEX[] = "0123456789abcdef";

/* "ACC" + the account in 5 decimal digits + its sequence in 5 hex digits + the lane in
 * 3: snprintf("ACC%05u%05x%03x") cost some 250 ns a document. */
static void business_key(char *p, uint32_t a, uint32_t c, uint32_t lane) {
    p[0] = 'A', p[1] = 'C', p[2] = 'C';
    for (int k = 7; k >= 3; k--, a /= 10) p[k] = (char)('0' + a % 10);
    for (int k = 12; k >= 8; k--, c >>= 4) p[k] = HEX[c & 15];
    for (int k = 15; k >= 13; k--, lane >>= 4) p[k] = HEX[lane & 15];
}

/* Draws first, in the Python reference's order (every document's _id, then each integer
 * field for every document), into scratch; then each document written in one pass. A
 * batch of 4 MB written in a pass per field went through memory once per pass: 170 ns
 * a 1 KB document against 105 for a batch that fits the core's cache. */
int doc_write(PyObject *self, char *dst, Py_ssize_t n, long long first) {
    DocWriter *w = (DocWriter *)self;
    Py_ssize_t size = w->size, id_words = w->kind == ID_UUID ? 4 : w->kind == ID_BUSINESS ? 2 : 0;
    uint32_t *r = scratch(w, n * (id_words + w->n_ints) + 1);
    if (r == NULL) return -1;
    uint32_t *ints = r + n * id_words;
    if (w->kind == ID_UUID) { /* randbytes(16 n): getrandbits' words, least significant first */
        for (Py_ssize_t k = 0; k < 4 * n; k++) r[k] = mt_next(&w->rng);
    } else if (w->kind == ID_BUSINESS) { /* an account's next key in this lane */
        for (Py_ssize_t d = 0; d < n; d++) {
            uint32_t a = mt_next(&w->rng) % ACCOUNTS, c = w->account_seq[a];
            if (c >= SEQ_LIMIT) {
                PyErr_Format(PyExc_ValueError, "account %u of lane %u has used all %d keys", a,
                             w->lane, SEQ_LIMIT);
                return -1;
            }
            w->account_seq[a] = c + 1;
            r[2 * d] = a, r[2 * d + 1] = c;
        }
    }
    for (int f = 0; f < w->n_ints; f++) /* randbytes(4 n) a field, each word mod the range */
        for (Py_ssize_t d = 0; d < n; d++)
            ints[f * n + d] = mt_next(&w->rng) % w->int_range;
    unsigned char oid[12];
    uint32_t oid_base = (uint32_t)w->oid_rand[4] << 24, oid_c = w->oid_counter;
    if (w->kind == ID_OBJECTID) { /* timestamp, 5 random bytes, counter: as a driver */
        be32(oid, (uint32_t)time(NULL));
        memcpy(oid + 4, w->oid_rand, 4);
    }
    Py_ssize_t blen = size - w->body_at, m = w->n_bodies, at = w->at;
    for (Py_ssize_t d = 0; d < n; d++) {
        char *doc = dst + d * size;
        memcpy(doc, w->raw, (size_t)w->body_at);
        if (w->kind == ID_OBJECTID) {
            be32(oid + 8, oid_base | ((oid_c + (uint32_t)d) & 0xFFFFFF));
            memcpy(doc + w->id_off, oid, 12);
        } else if (w->kind == ID_SERIAL) {
            int64_t v = first + d;
            memcpy(doc + w->id_off, &v, 8);
        } else if (w->kind == ID_UUID) {
            unsigned char *p = (unsigned char *)doc + w->id_off;
            memcpy(p, r + 4 * d, 16);
            p[6] = (unsigned char)((p[6] & 0x0F) | 0x40); /* version 4 and its variant */
            p[8] = (unsigned char)((p[8] & 0x3F) | 0x80);
        } else {
            business_key(doc + w->id_off, r[2 * d], r[2 * d + 1], w->lane);
        }
        for (int f = 0; f < w->n_ints; f++) {
            int32_t v = (int32_t)ints[f * n + d];
            memcpy(doc + w->int_offs[f], &v, 4);
        }
        PyObject *body = PyList_GET_ITEM(w->bodies, (at + d) % m);
        memcpy(doc + w->body_at, PyBytes_AS_STRING(body), (size_t)blen);
    }
    if (w->kind == ID_OBJECTID) w->oid_counter = (oid_c + (uint32_t)n) & 0xFFFFFF;
    w->at = (at + n) % m;
    return 0;
}

/* write(buf, pos, n, ids=None) -> bytes written, as DocFactory.write */
static PyObject *writer_write(PyObject *self, PyObject *a, PyObject *kw) {
    DocWriter *w = (DocWriter *)self;
    static char *names[] = {"buf", "pos", "n", "ids", NULL};
    Py_buffer buf;
    Py_ssize_t pos, n;
    PyObject *ids = Py_None;
    if (!PyArg_ParseTupleAndKeywords(a, kw, "w*nn|O", names, &buf, &pos, &n, &ids))
        return NULL;
    PyObject *seq = NULL;
    int bad = n < 0 || pos < 0 || pos + n * w->size > buf.len;
    if (!bad && w->kind == ID_SERIAL) {
        if (ids == Py_None) {
            PyErr_SetString(PyExc_ValueError, "serial ids are given by the caller: make(_id=n)");
        } else if ((seq = PySequence_Fast(ids, "ids must be a sequence")) != NULL &&
                   PySequence_Fast_GET_SIZE(seq) < n) {
            PyErr_SetString(PyExc_ValueError, "fewer ids than documents");
        }
    }
    if (bad) PyErr_SetString(PyExc_ValueError, "documents past the buffer");
    int r = PyErr_Occurred() ? -1 : doc_write(self, (char *)buf.buf + pos, n, 0);
    for (Py_ssize_t d = 0; r == 0 && seq != NULL && d < n; d++) {
        long long v = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, d));
        if (v == -1 && PyErr_Occurred()) r = -1;
        else memcpy((char *)buf.buf + pos + d * w->size + w->id_off, &v, 8);
    }
    Py_XDECREF(seq);
    PyBuffer_Release(&buf);
    return r < 0 ? NULL : PyLong_FromSsize_t(w->size * n);
}

static PyObject *attr(PyObject *o, const char *name) { return PyObject_GetAttrString(o, name); }

/* DocWriter(factory): the factory's template, pool, generator and counters, copied */
static int writer_init(PyObject *self, PyObject *a, PyObject *kw) {
    DocWriter *w = (DocWriter *)self;
    if (init_once(w->raw != NULL, "DocWriter") < 0) return -1;
    static char *names[] = {"factory", NULL};
    PyObject *f;
    if (!PyArg_ParseTupleAndKeywords(a, kw, "O", names, &f)) return -1;
    static const char *kinds[] = {"objectid", "uuid", "business_id", "serial"};
    PyObject *raw = attr(f, "raw"), *kind = attr(f, "id_type"), *offs = attr(f, "_int_offs");
    PyObject *bodies = attr(f, "_bodies"), *rng = attr(f, "_rng"), *oid = attr(f, "_oid_rand");
    PyObject *state = rng ? PyObject_CallMethod(rng, "getstate", NULL) : NULL;
    PyObject *seqs = attr(f, "_account_seq");
    int r = -1;
    long long range = 0;
    Py_ssize_t nb = 0, id_off = -1, at = -1, counter = -1, lane = -1;
    if (raw && kind && offs && bodies && state && oid && seqs) {
        PyObject *v;
#define NUM(name, var)                                   \
        v = attr(f, name);                                \
        if (v) {                                          \
            var = PyLong_AsLongLong(v);                   \
            Py_DECREF(v);                                 \
        }
        NUM("int_range", range) NUM("_n_bodies", nb) NUM("_id_off", id_off) NUM("_at", at)
        NUM("_oid_counter", counter) NUM("_lane", lane)
#undef NUM
        if (!PyErr_Occurred()) r = 0;
    }
    w->kind = -1;
    for (int k = 0; r == 0 && k < 4; k++)
        if (PyUnicode_Check(kind) && PyUnicode_CompareWithASCIIString(kind, kinds[k]) == 0)
            w->kind = k;
    if (r == 0 && (!PyBytes_Check(raw) || !PyList_Check(offs) || !PyList_Check(bodies) ||
                   !PyBytes_Check(oid) || PyBytes_GET_SIZE(oid) != 5 || w->kind < 0 ||
                   PyList_GET_SIZE(offs) > MAX_INTS || range < 1 || range > (1LL << 31) ||
                   nb < 1 || PyList_GET_SIZE(bodies) < nb || at < 0 || at >= nb ||
                   !PyTuple_Check(state) || PyTuple_GET_SIZE(state) != 3)) {
        PyErr_SetString(PyExc_ValueError, "DocWriter: not a DocFactory it can stand in for"
                                          " (more than 64 integer fields, or an integer range"
                                          " beyond 2**31)");
        r = -1;
    }
    if (r == 0) r = mt_load(&w->rng, PyTuple_GET_ITEM(state, 1));
    Py_ssize_t size = r == 0 ? PyBytes_GET_SIZE(raw) : 0;
    w->n_ints = r == 0 ? (int)PyList_GET_SIZE(offs) : 0;
    for (int k = 0; r == 0 && k < w->n_ints; k++) {
        w->int_offs[k] = PyLong_AsSsize_t(PyList_GET_ITEM(offs, k));
        if (w->int_offs[k] == -1 && PyErr_Occurred()) r = -1;
    }
    Py_ssize_t blen = -1;
    for (Py_ssize_t k = 0; r == 0 && k < nb; k++) { /* every body the same length */
        PyObject *b = PyList_GET_ITEM(bodies, k);
        if (!PyBytes_Check(b) || (blen >= 0 && PyBytes_GET_SIZE(b) != blen) ||
            PyBytes_GET_SIZE(b) > size) {
            PyErr_SetString(PyExc_ValueError, "DocWriter: the pool's bodies differ in length");
            r = -1;
        }
        blen = PyBytes_GET_SIZE(b);
    }
    static const int id_len[] = {12, 16, 16, 8};
    int bad = r == 0 && (id_off < 0 || id_off + id_len[w->kind] > size - blen ||
                         (w->kind == ID_BUSINESS &&
                          (!PyList_Check(seqs) || PyList_GET_SIZE(seqs) != ACCOUNTS)));
    for (int k = 0; r == 0 && k < w->n_ints; k++)
        bad |= w->int_offs[k] < 0 || w->int_offs[k] + 4 > size - blen;
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "DocWriter: a field past the document's template");
        r = -1;
    }
    if (r == 0) {
        char *copy = PyMem_Malloc((size_t)size);
        uint32_t *acc = w->kind == ID_BUSINESS ? PyMem_Malloc(ACCOUNTS * sizeof(uint32_t)) : NULL;
        if (copy == NULL || (w->kind == ID_BUSINESS && acc == NULL)) {
            PyMem_Free(copy);
            PyErr_NoMemory();
            r = -1;
        } else {
            for (int k = 0; acc != NULL && k < ACCOUNTS && r == 0; k++) {
                unsigned long c = PyLong_AsUnsignedLong(PyList_GET_ITEM(seqs, k));
                if (c == (unsigned long)-1 && PyErr_Occurred()) r = -1;
                acc[k] = (uint32_t)c;
            }
            if (r < 0) {
                PyMem_Free(copy);
                PyMem_Free(acc);
                copy = NULL;
                acc = NULL;
            }
        }
        if (r == 0) {
            memcpy(copy, PyBytes_AS_STRING(raw), (size_t)size);
            PyMem_Free(w->raw);
            PyMem_Free(w->account_seq);
            w->raw = copy;
            w->account_seq = acc;
        }
    }
    if (r == 0) {
        w->size = size;
        w->id_off = id_off;
        w->body_at = size - blen;
        w->int_range = (uint32_t)range;
        w->n_bodies = nb;
        w->at = at;
        w->oid_counter = (uint32_t)counter;
        memcpy(w->oid_rand, PyBytes_AS_STRING(oid), 5);
        w->lane = (uint32_t)lane;
        Py_INCREF(bodies);
        Py_XSETREF(w->bodies, bodies);
    }
    Py_XDECREF(raw); Py_XDECREF(kind); Py_XDECREF(offs); Py_XDECREF(bodies); Py_XDECREF(rng);
    Py_XDECREF(oid); Py_XDECREF(state); Py_XDECREF(seqs);
    return r;
}

static int writer_traverse(PyObject *self, visitproc visit, void *arg) {
    Py_VISIT(((DocWriter *)self)->bodies);
    return 0;
}

static int writer_clear(PyObject *self) {
    Py_CLEAR(((DocWriter *)self)->bodies);
    return 0;
}

static void writer_dealloc(PyObject *self) {
    DocWriter *w = (DocWriter *)self;
    PyObject_GC_UnTrack(self);
    writer_clear(self);
    PyMem_Free(w->raw);
    PyMem_Free(w->account_seq);
    free(w->scratch);
    Py_TYPE(self)->tp_free(self);
}

Py_ssize_t doc_size(PyObject *self) { return ((DocWriter *)self)->size; }

static PyObject *writer_size(PyObject *self, void *unused) {
    return PyLong_FromSsize_t(((DocWriter *)self)->size);
}

static PyMethodDef writer_methods[] = {
    {"write", (PyCFunction)(void (*)(void))writer_write, METH_VARARGS | METH_KEYWORDS,
     "write(buf, pos, n, ids=None) -> bytes written, as DocFactory.write"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef writer_getset[] = {
    {"size", writer_size, NULL, "a document's bytes", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject DocWriterType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "mongobench.driver._loop.DocWriter",
    .tp_basicsize = sizeof(DocWriter),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "DocWriter(factory): docgen.DocFactory.write in C, taking the factory's state over",
    .tp_new = PyType_GenericNew,
    .tp_init = writer_init,
    .tp_dealloc = writer_dealloc,
    .tp_traverse = writer_traverse,
    .tp_clear = writer_clear,
    .tp_methods = writer_methods,
    .tp_getset = writer_getset,
};

/* -- Inserts: sources.inserts. Each operation is a batch of n documents (the client's next
 * part of the total, or `batch` a time up to the quota), sent in messages of up to per_msg. */
typedef struct {
    PyObject_HEAD
    Common k; /* k.req: the message being sent; k.check: a batch of one's check */
    PyObject *docs, *bulk_check, *first_id, *sample_id, *bad;
    PyObject *msgs[MAX_SIZES]; /* a message for each size sent (its documents: msg_docs) */
    Py_ssize_t msg_docs[MAX_SIZES], seq_at, pos;
    int nmsgs, samples, sampled, count_bytes, has_total;
    long long per_msg, batch, size, next, stop, first;
    long long done, n, lo, m, ok, failed; /* the operation's batch, its message, so far */
    LastReply last[2]; /* a batch of one's, a bulk's */
} Inserts;

/* The message of m documents at lo of the batch, written (its prefix's, the documents) */
static int inserts_message(Inserts *s) {
    long long m = s->n - s->lo < s->per_msg ? s->n - s->lo : s->per_msg;
    PyObject *msg = NULL;
    for (int k = 0; k < s->nmsgs; k++)
        if (s->msg_docs[k] == m) msg = s->msgs[k];
    if (msg == NULL) {
        PyErr_Format(PyExc_RuntimeError, "Inserts: no message of %lld documents", m);
        return -1;
    }
    s->m = m;
    Py_INCREF(msg);
    Py_XSETREF(s->k.req, msg);
    return doc_write(s->docs, PyByteArray_AS_STRING(msg) + s->pos, (Py_ssize_t)m,
                     s->first + s->done + s->lo);
}

/* The next operation started: 1 (its first message filled), 0 when the source is done */
static int inserts_begin(Inserts *s) {
    if (s->has_total && s->next >= s->stop) return 0;
    int go = source_begin(&s->k);
    if (go <= 0) return go;
    if (s->has_total) {
        s->done = s->next;
        s->n = s->stop - s->next < s->batch ? s->stop - s->next : s->batch;
        s->next += s->batch;
    } else {
        s->done = 0;
        s->n = s->batch;
    }
    s->lo = s->ok = s->failed = 0;
    Py_CLEAR(s->bad);
    s->k.t0 = clock_now();
    return inserts_message(s) < 0 ? -1 : 1;
}

static int kind_is(PyObject *kind, const char *name) {
    return PyUnicode_Check(kind) && PyUnicode_CompareWithASCIIString(kind, name) == 0;
}

static int count_error_n(Common *s, PyObject *kind, PyObject *message, long long n) {
    PyObject *nn = PyLong_FromLongLong(n);
    if (nn == NULL) return -1;
    PyObject *r = PyObject_CallFunctionObjArgs(s->count_error, s->stats, s->op, kind, message,
                                               nn, NULL);
    Py_DECREF(nn);
    Py_XDECREF(r);
    return r == NULL ? -1 : 0;
}

/* The operation's end, counted as sources.inserts counts it: 0, or -1 */
static int inserts_end(Inserts *s) {
    Common *k = &s->k;
    PyObject *bad = s->bad;
    if (bad != NULL) {
        PyObject *kind = PyTuple_GET_ITEM(bad, 0), *msg = PyTuple_GET_ITEM(bad, 4);
        if (s->n == 1 || !kind_is(kind, "BulkWriteError"))
            return count_error_n(k, kind, msg, s->n);
        if (count_error_n(k, kind, msg, s->failed) < 0) return -1;
    }
    if (source_record(k) < 0 || incr_item(k->counts, k->op, 1) < 0 ||
        incr_attr(k->stats, s_docs, s->ok) < 0)
        return -1;
    if (s->count_bytes && incr_attr(k->stats, s_bytes, s->ok * s->size) < 0) return -1;
    if (bad == NULL && s->sampled < s->samples) { /* this client's first ones, for the audit */
        PyObject *pos = PyLong_FromSsize_t(s->pos);
        PyObject *id = pos ? PyObject_CallFunctionObjArgs(s->first_id, k->req, pos, NULL) : NULL;
        PyObject *r = id ? PyObject_CallOneArg(s->sample_id, id) : NULL;
        Py_XDECREF(pos);
        Py_XDECREF(id);
        if (r == NULL) return -1;
        Py_DECREF(r);
        s->sampled++;
    }
    return 0;
}

/* A message's outcome: 1 when the batch's next message is due (filled), 0 when the
 * operation is done (counted), -1 with an exception */
static int inserts_account(Inserts *s, PyObject *out) {
    if (PyTuple_GET_SIZE(out) < 6) {
        PyErr_SetString(PyExc_TypeError, "a write check's outcome is a tuple of 6");
        return -1;
    }
    PyObject *kind = PyTuple_GET_ITEM(out, 0);
    if (kind != Py_None && (s->n == 1 || !kind_is(kind, "BulkWriteError"))) {
        Py_INCREF(out);
        Py_XSETREF(s->bad, out);
        return inserts_end(s);
    }
    if (kind != Py_None) { /* some of the message's documents failed */
        long long got = PyLong_AsLongLong(PyTuple_GET_ITEM(out, 1));
        long long fails = PyLong_AsLongLong(PyTuple_GET_ITEM(out, 5));
        if (PyErr_Occurred()) return -1;
        long long ok = got < s->m - fails ? got : s->m - fails;
        s->ok += ok;
        s->failed += fails ? fails : s->m - (got < s->m ? got : s->m);
        if (s->bad == NULL) {
            Py_INCREF(out);
            s->bad = out;
        }
    } else {
        s->ok += s->m;
    }
    s->lo += s->m;
    if (s->lo < s->n) return inserts_message(s) < 0 ? -1 : 1;
    return inserts_end(s);
}

static int inserts_next(PyObject *self, PyObject *out, PyObject **req, PyObject **check) {
    Inserts *s = (Inserts *)self;
    int r = out != NULL ? inserts_account(s, out) : 0;
    if (r == 0) r = inserts_begin(s);
    *req = s->k.req;
    *check = s->n > 1 ? s->bulk_check : s->k.check;
    return r;
}

static PyObject *inserts_outcome(PyObject *self, PyObject *buf, Py_ssize_t length) {
    Inserts *s = (Inserts *)self;
    int bulk = s->n > 1;
    return cached_outcome(&s->last[bulk], bulk ? s->bulk_check : s->k.check, buf, length);
}

static const SourceOps inserts_ops = {inserts_next, inserts_outcome};

/* template: the bulk insert's prefix for no documents (header, command, the sequence's
 * header: its size at seq_at), documents from there */
static int inserts_init(PyObject *self, PyObject *a, PyObject *kw) {
    Inserts *s = (Inserts *)self;
    if (init_once(s->k.ops != NULL, "Inserts") < 0) return -1;
    static char *names[] = {COMMON_NAMES, "docs", "bulk_check", "per_msg", "batch", "sizes",
                            "seq_at", "count_bytes", "steps", "first_id", "sample_id",
                            "samples", NULL};
    COMMON_DECL
    int count_bytes, samples;
    long long per_msg, batch, start = 0, stop = 0, first = 0;
    Py_ssize_t seq_at;
    PyObject *docs, *bulk_check, *sizes, *steps, *first_id, *sample_id;
    if (!PyArg_ParseTupleAndKeywords(a, kw, COMMON_FORMAT "O!OLLO!npOOOi", names, COMMON_ARGS(),
                                     &DocWriterType, &docs, &bulk_check, &per_msg, &batch,
                                     &PyTuple_Type, &sizes, &seq_at, &count_bytes, &steps,
                                     &first_id, &sample_id, &samples))
        return -1;
    int r = steps == Py_None || PyArg_ParseTuple(steps, "LLL", &start, &stop, &first) ? 0 : -1;
    Py_ssize_t nsizes = PyTuple_GET_SIZE(sizes), size = ((DocWriter *)docs)->size;
    if (r == 0 && (per_msg < 1 || batch < 1 || nsizes < 1 || nsizes > MAX_SIZES ||
                   seq_at < 16 || seq_at + 4 > tmpl.len || PyTuple_GET_SIZE(draws) ||
                   (steps != Py_None && quota >= 0))) {
        PyErr_SetString(PyExc_ValueError, "Inserts: per_msg and batch of 1 or more, 1 to 4"
                                          " message sizes, the sequence's size in the template,"
                                          " no draws, steps without a quota");
        r = -1;
    }
    for (Py_ssize_t k = 0; r == 0 && k < MAX_SIZES; k++) Py_CLEAR(s->msgs[k]);
    s->nmsgs = 0;
    for (Py_ssize_t k = 0; r == 0 && k < nsizes; k++) { /* each message's prefix, for m */
        Py_ssize_t m = PyLong_AsSsize_t(PyTuple_GET_ITEM(sizes, k));
        if (m < 1 || m > per_msg) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "Inserts: a size past per_msg");
            r = -1;
            break;
        }
        PyObject *msg = PyByteArray_FromStringAndSize(NULL, tmpl.len + m * size);
        if (msg == NULL) {
            r = -1;
            break;
        }
        char *p = PyByteArray_AS_STRING(msg);
        /* Touched now, before the timed phase: its first writes would otherwise fault in
         * every page of it there (a client's messages can outweigh what a short run sends). */
        memset(p, 0, (size_t)(tmpl.len + m * size));
        memcpy(p, tmpl.buf, (size_t)tmpl.len);
        int32_t total = (int32_t)(tmpl.len + m * size), seq = le32(p + seq_at) + (int32_t)(m * size);
        memcpy(p, &total, 4);
        memcpy(p + 4, &rid, 4);
        memcpy(p + seq_at, &seq, 4);
        s->msgs[k] = msg;
        s->msg_docs[k] = m;
        s->nmsgs++;
    }
    if (r == 0) r = COMMON_INIT(&s->k, &inserts_ops);
    PyBuffer_Release(&tmpl);
    if (r < 0) return -1;
    Py_INCREF(s->msgs[0]);
    Py_XSETREF(s->k.req, s->msgs[0]);
#define KEEP(name) Py_INCREF(name); Py_XSETREF(s->name, name);
    KEEP(docs) KEEP(bulk_check) KEEP(first_id) KEEP(sample_id)
#undef KEEP
    Py_CLEAR(s->bad);
    s->pos = tmpl.len;
    s->seq_at = seq_at;
    s->per_msg = per_msg;
    s->batch = batch;
    s->size = size;
    s->count_bytes = count_bytes;
    s->has_total = steps != Py_None;
    s->next = start;
    s->stop = stop;
    s->first = first;
    s->samples = samples;
    s->sampled = 0;
    s->n = 0;
    last_reset(&s->last[0], s->k.check);
    last_reset(&s->last[1], s->bulk_check);
    return 0;
}

static int inserts_traverse(PyObject *self, visitproc visit, void *arg) {
    Inserts *s = (Inserts *)self;
    Py_VISIT(s->docs); Py_VISIT(s->bulk_check); Py_VISIT(s->first_id); Py_VISIT(s->sample_id);
    Py_VISIT(s->bad); Py_VISIT(s->last[0].out); Py_VISIT(s->last[1].out);
    for (int k = 0; k < MAX_SIZES; k++) Py_VISIT(s->msgs[k]);
    return common_traverse(&s->k, visit, arg);
}

static int inserts_clear(PyObject *self) {
    Inserts *s = (Inserts *)self;
    Py_CLEAR(s->docs); Py_CLEAR(s->bulk_check); Py_CLEAR(s->first_id); Py_CLEAR(s->sample_id);
    Py_CLEAR(s->bad); Py_CLEAR(s->last[0].out); Py_CLEAR(s->last[1].out);
    for (int k = 0; k < MAX_SIZES; k++) Py_CLEAR(s->msgs[k]);
    common_clear(&s->k);
    return 0;
}

SOURCE_TYPE(InsertsType, "Inserts", Inserts,
            "sources.inserts (batches split into messages, bulk write errors), in C",
            inserts_init, inserts_traverse, inserts_clear);

int docs_init(PyObject *m) {
    if (PyType_Ready(&DocWriterType) < 0 || PyType_Ready(&InsertsType) < 0) return -1;
    if (PyModule_AddObjectRef(m, "DocWriter", (PyObject *)&DocWriterType) < 0 ||
        PyModule_AddObjectRef(m, "Inserts", (PyObject *)&InsertsType) < 0)
        return -1;
    return 0;
}
