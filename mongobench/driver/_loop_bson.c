/* BSON walking for the compiled module (declared in _loop_bson.h): the reply checks' element count
 * (replies.count_elements is its reference) and the plain successes of cursor, findAndModify
 * and write replies (what replies.CursorCheck, FindAndModifyCheck and WriteCheck give). */
#include "_loop_bson.h"

/* The end of the value of BSON type t that starts at v in b[0:size] (as replies.value_end),
 * or -1: *bad says why (a length or a regex past the buffer), or *unknown is the type (else
 * left as it is: -1). */
static Py_ssize_t bson_value_end(const unsigned char *b, Py_ssize_t size, int t, Py_ssize_t v,
                                 const char **bad, int *unknown) {
    int32_t len = 0;
    switch (t) {
    case 3: case 4: case 15: case 2: case 13: case 14: case 5: case 12: case 16:
        if (v + 4 > size) {
            *bad = "value length past the buffer";
            return -1;
        }
        len = le32((const char *)b + v);
        break;
    default:
        break;
    }
    switch (t) {
    case 1: case 9: case 17: case 18: return v + 8;
    case 16: return v + 4;
    case 3: case 4: case 15: return v + len;
    case 2: case 13: case 14: return v + 4 + len;
    case 8: return v + 1;
    case 6: case 10: case 127: case 255: return v;
    case 7: return v + 12;
    case 5: return v + 5 + len;
    case 19: return v + 16;
    case 12: return v + 4 + len + 12;
    case 11: {
        const unsigned char *r = v < size ? memchr(b + v, 0, (size_t)(size - v)) : NULL;
        const unsigned char *o = r ? memchr(r + 1, 0, (size_t)(size - (r + 1 - b))) : NULL;
        if (o == NULL) {
            *bad = "regex without its NULs";
            return -1;
        }
        return o - b + 1;
    }
    default:
        *unknown = t;
        return -1;
    }
}

/* The elements of the BSON document (or array) at start, walking their headers; -1 with *bad
 * or *unknown set where replies.count_elements raises, or would loop (a length that does not
 * advance). */
Py_ssize_t bson_count(const unsigned char *b, Py_ssize_t size, Py_ssize_t start,
                             const char **bad, int *unknown) {
    Py_ssize_t n = 0;
    if (start < 0 || start + 4 > size) {
        *bad = "array header past the buffer";
        return -1;
    }
    Py_ssize_t end = start + le32((const char *)b + start) - 1, p = start + 4;
    while (p < end) {
        if (p >= size) {
            *bad = "element past the buffer";
            return -1;
        }
        const unsigned char *z = memchr(b + p + 1, 0, (size_t)(size - p - 1));
        if (z == NULL) {
            *bad = "element name without its NUL";
            return -1;
        }
        Py_ssize_t q = bson_value_end(b, size, b[p], z - b + 1, bad, unknown);
        if (q < 0) return -1;
        if (q <= p) {
            *bad = "a length that does not advance";
            return -1;
        }
        p = q;
        n++;
    }
    return n;
}

/* An element of a document: its type and value's span (type 0: absent) */
typedef struct {
    int type;
    Py_ssize_t at, end;
} Element;

/* Finds the elements named names[0..k) among those of the well-formed document at start (the
 * last of a name, as a dict keeps it); 0, or -1 for anything not walked whole and strictly
 * within the document. */
static int bson_find(const unsigned char *b, Py_ssize_t size, Py_ssize_t start,
                     const char *const *names, Element *found, int k) {
    for (int i = 0; i < k; i++) found[i].type = 0;
    if (start < 0 || start + 5 > size) return -1;
    Py_ssize_t end = start + le32((const char *)b + start) - 1, p = start + 4;
    if (end < p || end >= size || b[end] != 0) return -1;
    while (p < end) {
        const unsigned char *z = memchr(b + p + 1, 0, (size_t)(end - p - 1));
        if (z == NULL) return -1;
        const char *bad = NULL;
        int unknown = -1, t = b[p];
        Py_ssize_t v = z - b + 1, q = bson_value_end(b, end, t, v, &bad, &unknown);
        if (q <= p || q > end) return -1;
        for (int i = 0; i < k; i++)
            if (strcmp((const char *)b + p + 1, names[i]) == 0) {
                found[i].type = t;
                found[i].at = v;
                found[i].end = q;
            }
        p = q;
    }
    return p == end ? 0 : -1;
}

/* The outcome replies.CursorCheck gives a plain success, (None, documents, cursor id, None):
 * an ok: 1 reply with a cursor holding the batch array `batch` and an int64 id, and no
 * writeConcernError. NULL without an exception for any other reply (the check judges it). */
/* Whether the element is a number equal to 1 (as replies._number(...) == 1) */
static int is_one(const unsigned char *b, const Element *e) {
    if (e->type == 1) {
        double d;
        memcpy(&d, b + e->at, 8);
        return d == 1.0;
    }
    if (e->type == 16) return le32((const char *)b + e->at) == 1;
    if (e->type == 18) {
        int64_t v;
        memcpy(&v, b + e->at, 8);
        return v == 1;
    }
    return e->type == 8 && b[e->at] == 1;
}

PyObject *cursor_success(const unsigned char *b, Py_ssize_t length, const char *batch) {
    static const char *const top_names[] = {"cursor", "ok", "writeConcernError"};
    Element top[3], inner[2];
    if (bson_find(b, length, 21, top_names, top, 3) < 0 || top[0].type != 3 || top[2].type)
        return NULL;
    int one = is_one(b, &top[1]);
    const char *const inner_names[] = {batch, "id"};
    if (!one || bson_find(b, length, top[0].at, inner_names, inner, 2) < 0 ||
        inner[0].type != 4 || inner[1].type != 18)
        return NULL;
    const char *bad = NULL;
    int unknown = -1;
    Py_ssize_t n = bson_count(b, length, inner[0].at, &bad, &unknown);
    if (n < 0) return NULL;
    int64_t cid;
    memcpy(&cid, b + inner[1].at, 8);
    return Py_BuildValue("(OnLO)", Py_None, n, (long long)cid, Py_None);
}

/* The outcome replies.FindAndModifyCheck gives a plain success, (None, found, upserted, None):
 * an ok: 1 reply with a value (a document: found; null: not), no writeConcernError, and
 * lastErrorObject's upserted. NULL without an exception for any other reply. */
PyObject *find_and_modify_success(const unsigned char *b, Py_ssize_t length) {
    static const char *const top_names[] = {"ok", "value", "lastErrorObject",
                                            "writeConcernError"};
    static const char *const leo_names[] = {"upserted"};
    Element top[4], upserted = {0, 0, 0};
    if (bson_find(b, length, 21, top_names, top, 4) < 0 || !is_one(b, &top[0]) ||
        top[1].type == 0 || top[3].type)
        return NULL;
    if (top[2].type == 3 && bson_find(b, length, top[2].at, leo_names, &upserted, 1) < 0)
        return NULL;
    return Py_BuildValue("(OOOO)", Py_None, top[1].type == 3 ? Py_True : Py_False,
                         upserted.type ? Py_True : Py_False, Py_None);
}

/* An int32 or int64 element's value into *v: 0, or -1 for any other type */
static int int_value(const unsigned char *b, const Element *e, long long *v) {
    if (e->type == 16) {
        *v = le32((const char *)b + e->at);
        return 0;
    }
    if (e->type == 18) {
        int64_t x;
        memcpy(&x, b + e->at, 8);
        *v = x;
        return 0;
    }
    return -1;
}

/* The outcome replies.WriteCheck gives a plain success, (None, n, nModified, upserted, None,
 * 0) as replies.write_outcome makes it: an ok: 1 reply of no fields but n and nModified
 * (int32 or int64; absent: 0), upserted (an array: its elements counted) and ok. An
 * upsert's reply names its new _id, so no two are equal: read here, not by the check. NULL
 * without an exception for any other reply (errors, replica-set fields: the check's). */
PyObject *write_success(const unsigned char *b, Py_ssize_t length) {
    static const char *const names[] = {"n", "nModified", "upserted", "ok"};
    Element top[4];
    if (bson_find(b, length, 21, names, top, 4) < 0 || !is_one(b, &top[3])) return NULL;
    /* every element is one of the four: their headers' count against the document's */
    const char *bad = NULL;
    int unknown = -1;
    Py_ssize_t all = bson_count(b, length, 21, &bad, &unknown), named = 0;
    for (int i = 0; i < 4; i++) named += top[i].type != 0;
    long long n = 0, nmod = 0;
    if (all != named || (top[0].type && int_value(b, &top[0], &n) < 0) ||
        (top[1].type && int_value(b, &top[1], &nmod) < 0) || (top[2].type && top[2].type != 4))
        return NULL;
    Py_ssize_t ups = top[2].type ? bson_count(b, length, top[2].at, &bad, &unknown) : 0;
    if (ups < 0) return NULL;
    return Py_BuildValue("(OLLnOi)", Py_None, n, nmod, ups, Py_None, 0);
}

/* success(buf, length) from Python (tests): its outcome of a plain success, else None */
static PyObject *success_py(PyObject *a, PyObject *(*success)(const unsigned char *, Py_ssize_t)) {
    Py_buffer view;
    Py_ssize_t length;
    if (!PyArg_ParseTuple(a, "y*n", &view, &length)) return NULL;
    PyObject *out = length <= view.len ? success(view.buf, length) : NULL;
    PyBuffer_Release(&view);
    if (out == NULL && !PyErr_Occurred()) Py_RETURN_NONE;
    return out;
}

PyObject *write_success_py(PyObject *self, PyObject *a) { return success_py(a, write_success); }

PyObject *find_and_modify_success_py(PyObject *self, PyObject *a) {
    return success_py(a, find_and_modify_success);
}

/* cursor_success(buf, length, batch) -> the outcome of a plain success, else None (tests) */
PyObject *cursor_success_py(PyObject *self, PyObject *a) {
    Py_buffer view;
    Py_ssize_t length;
    const char *batch;
    if (!PyArg_ParseTuple(a, "y*ny", &view, &length, &batch)) return NULL;
    PyObject *out = length <= view.len ? cursor_success(view.buf, length, batch) : NULL;
    PyBuffer_Release(&view);
    if (out == NULL && !PyErr_Occurred()) Py_RETURN_NONE;
    return out;
}

/* count_elements(buf, start) -> the elements of the BSON array (or document) at `start`,
 * walking their headers as replies.count_elements does (its reference); ValueError where
 * that raises (an unknown type, a name or value past the buffer) and where it would loop
 * (a length that does not advance). */
PyObject *count_elements(PyObject *self, PyObject *a) {
    Py_buffer view;
    Py_ssize_t start;
    if (!PyArg_ParseTuple(a, "y*n", &view, &start)) return NULL;
    const char *bad = NULL;
    int unknown = -1;
    Py_ssize_t n = bson_count(view.buf, view.len, start, &bad, &unknown);
    PyBuffer_Release(&view);
    if (unknown >= 0) return PyErr_Format(PyExc_ValueError, "unknown BSON type %d", unknown);
    if (bad) return PyErr_Format(PyExc_ValueError, "malformed BSON: %s", bad);
    return PyLong_FromSsize_t(n);
}
