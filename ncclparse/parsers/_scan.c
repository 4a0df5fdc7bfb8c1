/* Native line scanner for ncclparse (issue 17): the block filter of
 * ncclparse.parsers._lines.without_nccl_debug in C.
 *
 * scan_block(block, end) splits block[:end] into lines exactly as
 * io.StringIO(block[:end], newline="").readlines() does (a line ends after "\n",
 * "\r\n" or a lone "\r"; the last line may have no ending) and applies the same
 * test as the Python path to each line: a line is KEPT (handed to Python) when
 *
 *   - its first character is one of " \t#[|>0123456789", or
 *   - it contains neither " NCCL INFO " nor " NCCL WARN ", or
 *   - it contains "version", "ailure", "imeout" or "_perf";
 *
 * every other line is a plain NCCL debug line that Python only counts. It returns
 * (number of lines, indices of the kept lines, their start offsets, their texts
 * with their endings, facts). facts[k] is the text of the skipped lines before
 * kept line k (facts[-1]: after the last) that may state a topology fact, joined,
 * or None when none may: the lines holding " via NET/" or "/GDRDMA", or "L INFO "
 * followed by what a fact starts with (_nccl_topology._HINT). No fact pattern
 * reaches across a line end or looks behind its start, so _nccl_topology.scan
 * reads the same facts in that text as in all the skipped lines (the Python path).
 *
 * Every kind of str is read (ASCII/Latin-1, UCS-2, UCS-4): the tested substrings
 * are ASCII and the line endings are only "\r" and "\n", so the result is the same
 * whatever else the text holds. Nothing here decides what a kept line means: that
 * stays with the Python parser, the reference.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem */
#endif
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

static const char READ_FIRST[] = " \t#[|>0123456789";

static int
read_first(Py_UCS4 c)
{
    return c < 128 && c != 0 && strchr(READ_FIRST, (int)c) != NULL;
}

/* One implementation per character width. */
#define DEFINE_SCANNER(NAME, CHAR)                                                  \
    static int NAME##_has(const CHAR *s, Py_ssize_t n, const char *needle)         \
    {                                                                               \
        Py_ssize_t m = (Py_ssize_t)strlen(needle);                                  \
        for (Py_ssize_t i = 0; i + m <= n; i++) {                                   \
            if (s[i] != (CHAR)(unsigned char)needle[0])                             \
                continue;                                                           \
            Py_ssize_t j = 1;                                                       \
            while (j < m && s[i + j] == (CHAR)(unsigned char)needle[j])             \
                j++;                                                                \
            if (j == m)                                                             \
                return 1;                                                           \
        }                                                                           \
        return 0;                                                                   \
    }                                                                               \
    static Py_ssize_t NAME##_line_end(const CHAR *s, Py_ssize_t i, Py_ssize_t n)   \
    {                                                                               \
        for (; i < n; i++) {                                                        \
            if (s[i] == '\n')                                                       \
                return i + 1;                                                       \
            if (s[i] == '\r')                                                       \
                return (i + 1 < n && s[i + 1] == '\n') ? i + 2 : i + 1;             \
        }                                                                           \
        return n;                                                                   \
    }

DEFINE_SCANNER(ucs2, Py_UCS2)
DEFINE_SCANNER(ucs4, Py_UCS4)

/* The offset of the first needle in s[from:n], or -1 (UCS-2, UCS-4). */
#define DEFINE_FIND(NAME, CHAR)                                                     \
    static Py_ssize_t NAME##_find(const CHAR *s, Py_ssize_t from, Py_ssize_t n,     \
                                  const char *needle)                               \
    {                                                                               \
        Py_ssize_t m = (Py_ssize_t)strlen(needle);                                  \
        for (Py_ssize_t i = from; i + m <= n; i++) {                                \
            Py_ssize_t j = 0;                                                       \
            while (j < m && s[i + j] == (CHAR)(unsigned char)needle[j])             \
                j++;                                                                \
            if (j == m)                                                             \
                return i;                                                           \
        }                                                                           \
        return -1;                                                                  \
    }

DEFINE_FIND(ucs2, Py_UCS2)
DEFINE_FIND(ucs4, Py_UCS4)

/* Whether a skipped line may state a topology fact (see the top of the file). */
#define DEFINE_FACT(NAME, CHAR)                                                     \
    static int NAME##_may_state_fact(const CHAR *s, Py_ssize_t n)                   \
    {                                                                               \
        if (NAME##_has(s, n, " via NET/") || NAME##_has(s, n, "/GDRDMA"))           \
            return 1;                                                               \
        for (Py_ssize_t i = NAME##_find(s, 0, n, "L INFO "); i >= 0;               \
             i = NAME##_find(s, i + 1, n, "L INFO ")) {                             \
            Py_UCS4 a = i + 7 < n ? (Py_UCS4)s[i + 7] : 0;                          \
            Py_UCS4 b = i + 8 < n ? (Py_UCS4)s[i + 8] : 0;                          \
            if ((a == 'N' && (b == 'E' || b == 'C' || b == 'V')) ||                 \
                (a == 'U' && b == 's') || (a == 'G' && b == 'P') ||                 \
                ((a == 'C' || a == 'c') && b == 'o') || (a == 'r' && b == 'a') ||   \
                (a == 'P' && b == '2') || (a == 'n' && b == 'v') ||                 \
                (a >= '1' && a <= '9'))                                             \
                return 1;                                                           \
        }                                                                           \
        return 0;                                                                   \
    }

DEFINE_FACT(ucs2, Py_UCS2)
DEFINE_FACT(ucs4, Py_UCS4)

/* Whether a line [s, s+n) (its ending included) is kept for Python. */
#define KEEP(NAME, S, N)                                                            \
    (read_first((S)[0]) ||                                                          \
     (!NAME##_has((S), (N), " NCCL INFO ") && !NAME##_has((S), (N), " NCCL WARN ")) \
     || NAME##_has((S), (N), "version") || NAME##_has((S), (N), "ailure") ||        \
     NAME##_has((S), (N), "imeout") || NAME##_has((S), (N), "_perf"))

static int
append_ssize(PyObject *list, Py_ssize_t value)
{
    PyObject *item = PyLong_FromSsize_t(value);
    if (item == NULL)
        return -1;
    int rc = PyList_Append(list, item);
    Py_DECREF(item);
    return rc;
}

static int
append_substring(PyObject *list, PyObject *block, Py_ssize_t start, Py_ssize_t stop)
{
    PyObject *text = PyUnicode_Substring(block, start, stop);
    if (text == NULL)
        return -1;
    int rc = PyList_Append(list, text);
    Py_DECREF(text);
    return rc;
}

/* Append to facts the joined candidate lines of the gap that ends (or None), and
 * empty the candidates. */
static int
end_gap(PyObject *facts, PyObject *candidates)
{
    Py_ssize_t n = PyList_GET_SIZE(candidates);
    PyObject *text;
    if (n == 0) {
        text = Py_NewRef(Py_None);
    }
    else if (n == 1) {
        text = Py_NewRef(PyList_GET_ITEM(candidates, 0));
    }
    else {
        PyObject *empty = PyUnicode_FromStringAndSize("", 0);
        if (empty == NULL)
            return -1;
        text = PyUnicode_Join(empty, candidates);
        Py_DECREF(empty);
        if (text == NULL)
            return -1;
    }
    int rc = PyList_Append(facts, text);
    Py_DECREF(text);
    if (rc < 0)
        return -1;
    return n ? PyList_SetSlice(candidates, 0, n, NULL) : 0;
}

static int
keep_line(PyObject *block, PyObject *indices, PyObject *starts, PyObject *raws,
          PyObject *facts, PyObject *candidates, Py_ssize_t index, Py_ssize_t start,
          Py_ssize_t stop)
{
    if (append_ssize(indices, index) < 0 || append_ssize(starts, start) < 0)
        return -1;
    if (end_gap(facts, candidates) < 0)
        return -1;
    return append_substring(raws, block, start, stop);
}

/* Latin-1/ASCII, the common case, faster: each needle that is rare in NCCL debug
 * output is searched once per occurrence in the whole block (memmem from where the
 * scan is to its next occurrence), not once per line. A line holds a needle when
 * the needle's next occurrence from the line's start ends within the line: no
 * needle holds "\r" or "\n", so none reaches across a line end. */
typedef struct {
    const char *needle;
    size_t length;
    Py_ssize_t next; /* first occurrence at or after the last asked position */
} Lazy;

static Py_ssize_t
lazy_next(Lazy *z, const Py_UCS1 *s, Py_ssize_t pos, Py_ssize_t n)
{
    if (z->next < pos) {
        const Py_UCS1 *at = memmem(s + pos, (size_t)(n - pos), z->needle, z->length);
        z->next = at ? (Py_ssize_t)(at - s) : PY_SSIZE_T_MAX;
    }
    return z->next;
}

static int
lazy_in(Lazy *z, const Py_UCS1 *s, Py_ssize_t pos, Py_ssize_t stop, Py_ssize_t n)
{
    Py_ssize_t at = lazy_next(z, s, pos, n);
    return at != PY_SSIZE_T_MAX && at + (Py_ssize_t)z->length <= stop;
}

#define LAZY(TEXT) {TEXT, sizeof(TEXT) - 1, -1}

static int
ucs1_hint(const Py_UCS1 *s, Py_ssize_t at, Py_ssize_t stop)
{
    Py_UCS4 a = at + 7 < stop ? s[at + 7] : 0, b = at + 8 < stop ? s[at + 8] : 0;
    return (a == 'N' && (b == 'E' || b == 'C' || b == 'V')) || (a == 'U' && b == 's') ||
           (a == 'G' && b == 'P') || ((a == 'C' || a == 'c') && b == 'o') ||
           (a == 'r' && b == 'a') || (a == 'P' && b == '2') || (a == 'n' && b == 'v') ||
           (a >= '1' && a <= '9');
}

static int
scan_ucs1(PyObject *block, const Py_UCS1 *s, Py_ssize_t end, PyObject *indices,
          PyObject *starts, PyObject *raws, PyObject *facts, PyObject *candidates,
          Py_ssize_t *lines)
{
    Lazy cr = LAZY("\r"), info = LAZY(" NCCL INFO "), warn = LAZY(" NCCL WARN ");
    Lazy version = LAZY("version"), ailure = LAZY("ailure"), imeout = LAZY("imeout");
    Lazy perf = LAZY("_perf"), via = LAZY(" via NET/"), gdr = LAZY("/GDRDMA");
    Lazy linfo = LAZY("L INFO ");
    Py_ssize_t count = 0, pos = 0;
    while (pos < end) {
        const Py_UCS1 *nl = memchr(s + pos, '\n', (size_t)(end - pos));
        Py_ssize_t stop = nl ? (Py_ssize_t)(nl - s) + 1 : end;
        Py_ssize_t at = lazy_next(&cr, s, pos, end);
        if (at < stop - (nl != NULL)) /* a "\r" before the "\n" */
            stop = (at + 1 < end && s[at + 1] == '\n') ? at + 2 : at + 1;
        int keep = read_first(s[pos]) ||
                   (!lazy_in(&info, s, pos, stop, end) &&
                    !lazy_in(&warn, s, pos, stop, end)) ||
                   lazy_in(&version, s, pos, stop, end) ||
                   lazy_in(&ailure, s, pos, stop, end) ||
                   lazy_in(&imeout, s, pos, stop, end) ||
                   lazy_in(&perf, s, pos, stop, end);
        if (keep) {
            if (keep_line(block, indices, starts, raws, facts, candidates, count, pos,
                          stop) < 0)
                return -1;
        }
        else {
            int fact =
                lazy_in(&via, s, pos, stop, end) || lazy_in(&gdr, s, pos, stop, end);
            for (Py_ssize_t from = pos; !fact;) {
                Py_ssize_t hit = lazy_next(&linfo, s, from, end);
                if (hit == PY_SSIZE_T_MAX || hit + 7 > stop)
                    break;
                fact = ucs1_hint(s, hit, stop);
                from = hit + 1;
            }
            if (fact && append_substring(candidates, block, pos, stop) < 0)
                return -1;
        }
        count++;
        pos = stop;
    }
    *lines = count;
    return 0;
}

#define SCAN_LOOP(NAME, CHAR)                                                       \
    do {                                                                            \
        const CHAR *s = (const CHAR *)data;                                         \
        while (pos < end) {                                                         \
            Py_ssize_t stop = NAME##_line_end(s, pos, end);                         \
            if (KEEP(NAME, s + pos, stop - pos)) {                                  \
                if (keep_line(block, indices, starts, raws, facts, candidates,      \
                              count, pos, stop) < 0)                                \
                    goto fail;                                                      \
            }                                                                       \
            else if (NAME##_may_state_fact(s + pos, stop - pos)) {                  \
                if (append_substring(candidates, block, pos, stop) < 0)             \
                    goto fail;                                                      \
            }                                                                       \
            count++;                                                                \
            pos = stop;                                                             \
        }                                                                           \
    } while (0)

static PyObject *
scan_block(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 2 || !PyUnicode_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "scan_block(block: str, end: int)");
        return NULL;
    }
    PyObject *block = args[0];
#if PY_VERSION_HEX < 0x030C0000
    /* A str made by the legacy API may not be in its compact form yet (3.11). */
    if (PyUnicode_READY(block) < 0)
        return NULL;
#endif
    Py_ssize_t end = PyLong_AsSsize_t(args[1]);
    if (end == -1 && PyErr_Occurred())
        return NULL;
    Py_ssize_t length = PyUnicode_GET_LENGTH(block);
    if (end < 0 || end > length) {
        PyErr_SetString(PyExc_ValueError, "end out of range");
        return NULL;
    }
    PyObject *indices = PyList_New(0);
    PyObject *starts = PyList_New(0);
    PyObject *raws = PyList_New(0);
    PyObject *facts = PyList_New(0);
    PyObject *candidates = PyList_New(0);
    if (indices == NULL || starts == NULL || raws == NULL || facts == NULL ||
        candidates == NULL)
        goto fail;
    Py_ssize_t count = 0, pos = 0;
    const void *data = PyUnicode_DATA(block);
    switch (PyUnicode_KIND(block)) {
    case PyUnicode_1BYTE_KIND:
        if (scan_ucs1(block, (const Py_UCS1 *)data, end, indices, starts, raws, facts,
                      candidates, &count) < 0)
            goto fail;
        break;
    case PyUnicode_2BYTE_KIND:
        SCAN_LOOP(ucs2, Py_UCS2);
        break;
    default:
        SCAN_LOOP(ucs4, Py_UCS4);
        break;
    }
    if (end_gap(facts, candidates) < 0)
        goto fail;
    Py_DECREF(candidates);
    return Py_BuildValue("(nNNNN)", count, indices, starts, raws, facts);
fail:
    Py_XDECREF(indices);
    Py_XDECREF(starts);
    Py_XDECREF(raws);
    Py_XDECREF(facts);
    Py_XDECREF(candidates);
    return NULL;
}

static PyMethodDef methods[] = {
    {"scan_block", (PyCFunction)(void (*)(void))scan_block, METH_FASTCALL,
     "scan_block(block, end) -> (lines, kept indices, kept starts, kept texts, "
     "facts)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_scan",
    "Native line scanner: the plain NCCL debug line filter (see _lines).", -1,
    methods,
};

PyMODINIT_FUNC
PyInit__scan(void)
{
    return PyModule_Create(&module);
}
