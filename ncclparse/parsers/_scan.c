/* Native line scanner for ncclparse (issue 17): the block filter of
 * ncclparse.parsers._lines.without_nccl_debug in C (scan_block, and scan_bytes for
 * a file's bytes), a reader of plain nccl-tests data rows (read_rows and
 * read_rows_columns, further down), and the columns of row dicts (dict_columns).
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
 * or None when none may: the lines holding " via NET/", "/GDRDMA" or " Bytes -> Algo "
 * (_nccl_topology._TUNED), or "L INFO " followed by what a fact starts with
 * (_nccl_topology._HINT). No fact pattern
 * reaches across a line end or looks behind its start, so _nccl_topology.scan
 * reads the same facts in that text as in all the skipped lines (the Python path).
 * (In Latin-1 text, a channel line is given from its " via NET/" on: see
 * scan_ucs1.)
 *
 * Every kind of str is read (ASCII/Latin-1, UCS-2, UCS-4): the tested substrings
 * are ASCII and the line endings are only "\r" and "\n", so the result is the same
 * whatever else the text holds. The filter decides nothing about what a kept
 * line means; read_rows reads only lines whose meaning the Python parser, the
 * reference, has already settled (a plain row of the table it is in) and gives
 * None for every other, which the parser then reads itself.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem */
#endif
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

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
        if (NAME##_has(s, n, " via NET/") || NAME##_has(s, n, "/GDRDMA") ||         \
            NAME##_has(s, n, " Bytes -> Algo "))                                    \
            return 1;                                                               \
        for (Py_ssize_t i = NAME##_find(s, 0, n, "L INFO "); i >= 0;               \
             i = NAME##_find(s, i + 1, n, "L INFO ")) {                             \
            Py_UCS4 a = i + 7 < n ? (Py_UCS4)s[i + 7] : 0;                          \
            Py_UCS4 b = i + 8 < n ? (Py_UCS4)s[i + 8] : 0;                          \
            if ((a == 'N' && (b == 'E' || b == 'C' || b == 'V')) ||                 \
                (a == 'U' && b == 's') || (a == 'G' && b == 'P') ||                 \
                ((a == 'C' || a == 'c') && b == 'o') || (a == 'r' && b == 'a') ||   \
                (a == 'P' && b == '2') || (a == 'n' && b == 'v') ||                 \
                (a == 'E' && b == 'n') || (a == 'T' && b == 'U') ||                 \
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

/* Append item, a new reference (NULL: its error is set), to list and release it. */
static int
append_new(PyObject *list, PyObject *item)
{
    if (item == NULL)
        return -1;
    int rc = PyList_Append(list, item);
    Py_DECREF(item);
    return rc;
}

/* What the scan of a block found, in C arrays so that it runs without the GIL:
 * the kept lines (their index and span) and the skipped lines that may state a
 * fact (their span and how many lines were kept before them). */
typedef struct {
    Py_ssize_t index, start, stop;
} Kept;

typedef struct {
    Py_ssize_t start, stop, gap;
} Candidate;

typedef struct {
    Kept *kept;
    Py_ssize_t n_kept, cap_kept;
    Candidate *candidates;
    Py_ssize_t n_candidates, cap_candidates;
    Py_ssize_t lines;
} Found;

/* Grow an array of items of `size` bytes to hold one more; -1 out of memory.
 * PyMem_Raw*: callable without the GIL. */
static int
grow(void **items, Py_ssize_t used, Py_ssize_t *capacity, size_t size)
{
    if (used < *capacity)
        return 0;
    Py_ssize_t wanted = *capacity ? 2 * *capacity : 256;
    void *more = PyMem_RawRealloc(*items, (size_t)wanted * size);
    if (more == NULL)
        return -1;
    *items = more;
    *capacity = wanted;
    return 0;
}

static int
found_kept(Found *f, Py_ssize_t index, Py_ssize_t start, Py_ssize_t stop)
{
    if (grow((void **)&f->kept, f->n_kept, &f->cap_kept, sizeof(Kept)) < 0)
        return -1;
    f->kept[f->n_kept++] = (Kept){index, start, stop};
    return 0;
}

static int
found_candidate(Found *f, Py_ssize_t start, Py_ssize_t stop)
{
    if (grow((void **)&f->candidates, f->n_candidates, &f->cap_candidates,
             sizeof(Candidate)) < 0)
        return -1;
    f->candidates[f->n_candidates++] = (Candidate){start, stop, f->n_kept};
    return 0;
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

#if defined(__SSE2__)
#include <emmintrin.h>
/* memmem for the short needles here, 16 positions at a time: a position is a
 * candidate when the needle's first and last bytes are there, and only candidates
 * are compared (glibc's memmem, a byte-wise skip search, was most of the scan). */
static const Py_UCS1 *
find(const Py_UCS1 *s, size_t n, const char *needle, size_t m)
{
    if (m == 1)
        return memchr(s, needle[0], n);
    const __m128i first = _mm_set1_epi8(needle[0]), last = _mm_set1_epi8(needle[m - 1]);
    size_t i = 0;
    for (; i + m - 1 + 16 <= n; i += 16) {
        __m128i a = _mm_loadu_si128((const __m128i *)(s + i));
        __m128i b = _mm_loadu_si128((const __m128i *)(s + i + m - 1));
        unsigned mask = (unsigned)_mm_movemask_epi8(
            _mm_and_si128(_mm_cmpeq_epi8(a, first), _mm_cmpeq_epi8(b, last)));
        for (; mask; mask &= mask - 1) {
            unsigned bit = (unsigned)__builtin_ctz(mask);
            if (memcmp(s + i + bit + 1, needle + 1, m - 2) == 0)
                return s + i + bit;
        }
    }
    for (; i + m <= n; i++) /* the last few positions */
        if (s[i] == (Py_UCS1)needle[0] && memcmp(s + i + 1, needle + 1, m - 1) == 0)
            return s + i;
    return NULL;
}
#else
#define find(s, n, needle, m) ((const Py_UCS1 *)memmem((s), (n), (needle), (m)))
#endif

static Py_ssize_t
lazy_next(Lazy *z, const Py_UCS1 *s, Py_ssize_t pos, Py_ssize_t n)
{
    if (z->next < pos) {
        const Py_UCS1 *at = find(s + pos, (size_t)(n - pos), z->needle, z->length);
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
           (a == 'E' && b == 'n') || (a == 'T' && b == 'U') || (a >= '1' && a <= '9');
}

/* Whether s[pos:stop) holds " NCCL INFO " or " NCCL WARN ". These are in most
 * lines, so they are looked for line by line, from each "N" (memmem's set-up per
 * call cost more than the search). */
static int
ucs1_has_level(const Py_UCS1 *s, Py_ssize_t pos, Py_ssize_t stop)
{
    const Py_UCS1 *p = s + pos + 1, *end = s + stop; /* a blank before the "N" */
    while (end - p >= 10 && (p = memchr(p, 'N', (size_t)(end - p - 9))) != NULL) {
        if (p[-1] == ' ' && memcmp(p, "NCCL ", 5) == 0 &&
            (memcmp(p + 5, "INFO ", 5) == 0 || memcmp(p + 5, "WARN ", 5) == 0))
            return 1;
        p++;
    }
    return 0;
}

/* Whether an "L INFO " in s[pos:stop) is followed by what a fact starts with. */
static int
ucs1_hinted(const Py_UCS1 *s, Py_ssize_t pos, Py_ssize_t stop)
{
    const Py_UCS1 *p = s + pos, *end = s + stop;
    while (end - p >= 7 && (p = memchr(p, 'L', (size_t)(end - p - 6))) != NULL) {
        if (memcmp(p, "L INFO ", 7) == 0 && ucs1_hint(s, p - s, stop))
            return 1;
        p++;
    }
    return 0;
}

static int
scan_ucs1(const Py_UCS1 *s, Py_ssize_t end, Found *f)
{
    Lazy cr = LAZY("\r");
    Lazy version = LAZY("version"), ailure = LAZY("ailure"), imeout = LAZY("imeout");
    Lazy perf = LAZY("_perf"), via = LAZY(" via NET/"), gdr = LAZY("/GDRDMA");
    Lazy tuned = LAZY(" Bytes -> Algo ");
    Py_ssize_t count = 0, pos = 0;
    while (pos < end) {
        const Py_UCS1 *nl = memchr(s + pos, '\n', (size_t)(end - pos));
        Py_ssize_t stop = nl ? (Py_ssize_t)(nl - s) + 1 : end;
        Py_ssize_t at = lazy_next(&cr, s, pos, end);
        if (at < stop - (nl != NULL)) /* a "\r" before the "\n" */
            stop = (at + 1 < end && s[at + 1] == '\n') ? at + 2 : at + 1;
        int keep = read_first(s[pos]) || !ucs1_has_level(s, pos, stop) ||
                   lazy_in(&version, s, pos, stop, end) ||
                   lazy_in(&ailure, s, pos, stop, end) ||
                   lazy_in(&imeout, s, pos, stop, end) ||
                   lazy_in(&perf, s, pos, stop, end);
        if (keep) {
            if (found_kept(f, count, pos, stop) < 0)
                return -1;
        }
        else {
            int by_net = lazy_in(&via, s, pos, stop, end);
            int by_gdr = lazy_in(&gdr, s, pos, stop, end);
            int hinted = ucs1_hinted(s, pos, stop) || lazy_in(&tuned, s, pos, stop, end);
            /* A channel line (" via NET/", no fact hint, no "/GDRDMA" before it)
             * states only what scan reads from its " via NET/" on: that part alone
             * is handed on. It is the same for every rank and channel, so the
             * parser reads it once (_nccl_topology.scan_cached). */
            Py_ssize_t from = by_net && !hinted && !(by_gdr && gdr.next < via.next)
                                  ? via.next
                                  : pos;
            if ((by_net || by_gdr || hinted) && found_candidate(f, from, stop) < 0)
                return -1;
        }
        count++;
        pos = stop;
    }
    f->lines = count;
    return 0;
}

#define DEFINE_SCAN(NAME, CHAR)                                                     \
    static int scan_##NAME(const CHAR *s, Py_ssize_t end, Found *f)                 \
    {                                                                               \
        Py_ssize_t count = 0, pos = 0;                                              \
        while (pos < end) {                                                         \
            Py_ssize_t stop = NAME##_line_end(s, pos, end);                         \
            if (KEEP(NAME, s + pos, stop - pos)) {                                  \
                if (found_kept(f, count, pos, stop) < 0)                            \
                    return -1;                                                      \
            }                                                                       \
            else if (NAME##_may_state_fact(s + pos, stop - pos)) {                  \
                if (found_candidate(f, pos, stop) < 0)                              \
                    return -1;                                                      \
            }                                                                       \
            count++;                                                                \
            pos = stop;                                                             \
        }                                                                           \
        f->lines = count;                                                           \
        return 0;                                                                   \
    }

DEFINE_SCAN(ucs2, Py_UCS2)
DEFINE_SCAN(ucs4, Py_UCS4)

/* The text of block[start:stop): a str's substring, or UTF-8 bytes decoded as the
 * reader decodes them (invalid sequences replaced). Lines end at ASCII "\r" or
 * "\n", which no multi-byte sequence holds, so a line decodes alone as it does
 * within its file. */
static PyObject *
text_of(PyObject *block, const char *bytes, Py_ssize_t start, Py_ssize_t stop)
{
    if (bytes != NULL)
        return PyUnicode_DecodeUTF8(bytes + start, stop - start, "replace");
    return PyUnicode_Substring(block, start, stop);
}

/* The facts text of the gap before kept line `gap` (gap == n_kept: after the
 * last): its candidate lines joined, or None. *next: the first candidate not yet
 * used, advanced past this gap's. */
static PyObject *
gap_facts(PyObject *block, const char *bytes, const Found *f, Py_ssize_t gap,
          Py_ssize_t *next)
{
    Py_ssize_t first = *next, last = first;
    while (last < f->n_candidates && f->candidates[last].gap == gap)
        last++;
    *next = last;
    if (last == first)
        return Py_NewRef(Py_None);
    if (last - first == 1)
        return text_of(block, bytes, f->candidates[first].start,
                       f->candidates[first].stop);
    PyObject *parts = PyList_New(0);
    if (parts == NULL)
        return NULL;
    for (Py_ssize_t c = first; c < last; c++)
        if (append_new(parts, text_of(block, bytes, f->candidates[c].start,
                                      f->candidates[c].stop)) < 0) {
            Py_DECREF(parts);
            return NULL;
        }
    PyObject *empty = PyUnicode_FromStringAndSize("", 0);
    PyObject *text = empty ? PyUnicode_Join(empty, parts) : NULL;
    Py_XDECREF(empty);
    Py_DECREF(parts);
    return text;
}

/* The result tuple of scan_block from what the scan found (bytes: the data of a
 * bytes-like block, else NULL for a str). */
static PyObject *
scan_result(PyObject *block, const char *bytes, const Found *f)
{
    PyObject *indices = PyList_New(f->n_kept), *starts = PyList_New(f->n_kept);
    PyObject *raws = PyList_New(f->n_kept), *facts = PyList_New(f->n_kept + 1);
    if (indices == NULL || starts == NULL || raws == NULL || facts == NULL)
        goto fail;
    Py_ssize_t next = 0;
    for (Py_ssize_t k = 0; k <= f->n_kept; k++) {
        PyObject *text = gap_facts(block, bytes, f, k, &next);
        if (text == NULL)
            goto fail;
        PyList_SET_ITEM(facts, k, text);
        if (k == f->n_kept)
            break;
        const Kept *line = &f->kept[k];
        PyObject *index = PyLong_FromSsize_t(line->index);
        PyObject *start = PyLong_FromSsize_t(line->start);
        PyObject *raw = text_of(block, bytes, line->start, line->stop);
        /* A list made by PyList_New holds NULL items until set; DECREF is safe. */
        if (index)
            PyList_SET_ITEM(indices, k, index);
        if (start)
            PyList_SET_ITEM(starts, k, start);
        if (raw)
            PyList_SET_ITEM(raws, k, raw);
        if (index == NULL || start == NULL || raw == NULL)
            goto fail;
    }
    return Py_BuildValue("(nNNNN)", f->lines, indices, starts, raws, facts);
fail:
    Py_XDECREF(indices);
    Py_XDECREF(starts);
    Py_XDECREF(raws);
    Py_XDECREF(facts);
    return NULL;
}

/* scan_block(block, end): see the top of the file. The scan itself runs without
 * the GIL (block is a str, immutable, and referenced by the call), so that a
 * reader thread scans the next block while the parser reads this one. */
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
    Found found = {0};
    const void *data = PyUnicode_DATA(block);
    int kind = PyUnicode_KIND(block), rc;
    Py_BEGIN_ALLOW_THREADS
    if (kind == PyUnicode_1BYTE_KIND)
        rc = scan_ucs1((const Py_UCS1 *)data, end, &found);
    else if (kind == PyUnicode_2BYTE_KIND)
        rc = scan_ucs2((const Py_UCS2 *)data, end, &found);
    else
        rc = scan_ucs4((const Py_UCS4 *)data, end, &found);
    Py_END_ALLOW_THREADS
    PyObject *result = rc < 0 ? PyErr_NoMemory() : scan_result(block, NULL, &found);
    PyMem_RawFree(found.kept);
    PyMem_RawFree(found.candidates);
    return result;
}

/* scan_bytes(block, end): scan_block for UTF-8 bytes (any bytes-like object),
 * which need not be decoded first: only the kept lines and fact texts are, and
 * the starts are byte offsets. The result is scan_block's for the decoded block:
 * the tested substrings and line ends are ASCII, which UTF-8 holds only as
 * themselves, and a byte of a multi-byte sequence (or an invalid one, which the
 * decoder replaces) is not ASCII, as the character it gives is not. */
static PyObject *
scan_bytes(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    Py_buffer view;
    if (nargs != 2 || PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "scan_bytes(block: bytes, end: int)");
        return NULL;
    }
    PyObject *result = NULL;
    Py_ssize_t end = PyLong_AsSsize_t(args[1]);
    if (end == -1 && PyErr_Occurred())
        goto done;
    if (end < 0 || end > view.len) {
        PyErr_SetString(PyExc_ValueError, "end out of range");
        goto done;
    }
    Found found = {0};
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = scan_ucs1((const Py_UCS1 *)view.buf, end, &found);
    Py_END_ALLOW_THREADS
    result = rc < 0 ? PyErr_NoMemory() : scan_result(args[0], view.buf, &found);
    PyMem_RawFree(found.kept);
    PyMem_RawFree(found.candidates);
done:
    PyBuffer_Release(&view);
    return result;
}

/* ---------------------------------------------------------------------------
 * read_rows(numbers, raws, spec, start, limit): the measurement rows of plain nccl-tests data
 * lines, as the Python parser (nccl_tests._Parser._data/_row with
 * _nccl_layout.read_row) would build them for a run in its table, or None for a
 * line it must read itself.
 *
 * spec (built by _nccl_layout.row_spec from a Layout) is
 *   (labels, half, placements, time_in_ms, cputime, wrong_kind, iter_skipped,
 *    dtypes)
 * labels: how many redop/root key columns the layout has after `type`; half: the
 * metric of each column of a placement block (M_* codes below); placements: the
 * block names; wrong_kind: the layout's, or None (decided per row); iter_skipped:
 * the int every block gets as "iter_skipped", or None; dtypes: printed type names
 * to schema dtypes.
 *
 * A line is read here only when nothing about it needs the parser's judgement: it
 * ends with a line ending and holds no other "\r"; it is printable ASCII with
 * blanks and tabs between tokens and starts with a blank; it holds no "CCL ",
 * "ailure" or "imeout"; size and count are plain digits (at most 18 significant);
 * the type is a known one; the key tokens between type and the metrics are at
 * most `labels` (an integer one a root within int32); every metric token is a
 * number as _nccl_layout._FLOAT reads one, or N/A; none is marked "*"; time,
 * algbw and busbw are finite and not negative; and a block is either wholly
 * printed or N/A in time, algbw and busbw. Any other line gives None, and the
 * parser reads it line by line (the reference). Each read line gives
 * (number of tokens, (row dict per printed block, ...)). The lines from `start`
 * on are read, at most `limit`, and reading stops after the first None: the
 * parser reads that line, which may change what the next ones mean (a new run),
 * so each line is read once.
 *
 * read_rows_columns(numbers, raws, spec, start, limit) reads the same lines the same way, but
 * gives their rows as columns, for rows that go to a run's spill: per line its
 * token count (0: the parser's to read) and how many rows the lines up to it gave;
 * per row its line, size, count, root, each metric (C values, and a byte per value
 * saying whether it is there), and placement, dtype, redop and wrong_kind as their
 * distinct values and a code per row. _native_rows.py turns them into Arrow.
 * ------------------------------------------------------------------------- */

/* The order of _nccl_layout.NATIVE_METRICS (codes in a spec's half). */
enum { M_TIME, M_ALGBW, M_BUSBW, M_WRONG, M_IMIN, M_IMAX, M_IP99, M_ICV, M_KINDS };

#define MAX_ROW_LINE 4096
#define MAX_TOKENS 64

/* Row dict keys in the order _row inserts them. */
enum {
    K_LINE, K_PLACEMENT, K_REPORTED, K_SIZE, K_COUNT, K_DTYPE, K_REDOP, K_ROOT,
    K_TIME, K_ALGBW, K_BUSBW, K_WRONG, K_TMIN, K_TMAX, K_TP99, K_STDDEV,
    K_WRONG_KIND, K_CPUTIME, K_TIMESTAMP, K_ITER_SKIPPED, K_KEYS
};
static const char *KEY_NAMES[K_KEYS] = {
    "line", "placement", "reported_bytes", "size_bytes", "count", "dtype", "redop",
    "root", "time_us", "algbw_gbps", "busbw_gbps", "wrong", "time_min_us",
    "time_max_us", "time_p99_us", "stddev_pct", "wrong_kind", "cputime",
    "timestamp", "iter_skipped",
};
/* The row key of each metric after time (M_ALGBW ...). */
static const int METRIC_KEY[M_KINDS] = {
    K_TIME, K_ALGBW, K_BUSBW, K_WRONG, K_TMIN, K_TMAX, K_TP99, K_STDDEV,
};
static PyObject *keys[K_KEYS];
static PyObject *str_count, *str_deviation;

typedef struct {
    Py_ssize_t start, length;
} Token;

static int
is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static Py_ssize_t
digits(const char *s, Py_ssize_t i, Py_ssize_t n)
{
    Py_ssize_t j = i;
    while (j < n && is_digit(s[j]))
        j++;
    return j - i;
}

/* _nccl_layout._FLOAT: [-+]?((\d+\.?\d*|\.\d+)(e[-+]?\d+)?|nan|inf(inity)?),
 * letters in any case. */
static int
is_float(const char *s, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    if (i < n && (s[i] == '-' || s[i] == '+'))
        i++;
    char first = i < n ? s[i] : 0;
    if ((first == 'n' || first == 'N') && n - i == 3 &&
        strncasecmp(s + i, "nan", 3) == 0)
        return 1;
    if ((first == 'i' || first == 'I') && n - i >= 3 &&
        strncasecmp(s + i, "inf", 3) == 0)
        return n - i == 3 || (n - i == 8 && strncasecmp(s + i + 3, "inity", 5) == 0);
    Py_ssize_t whole = digits(s, i, n);
    i += whole;
    if (whole > 0) {
        if (i < n && s[i] == '.')
            i += 1 + digits(s, i + 1, n);
    }
    else {
        if (i >= n || s[i] != '.')
            return 0;
        Py_ssize_t fraction = digits(s, i + 1, n);
        if (fraction == 0)
            return 0;
        i += 1 + fraction;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '-' || s[i] == '+'))
            i++;
        Py_ssize_t exponent = digits(s, i, n);
        if (exponent == 0)
            return 0;
        i += exponent;
    }
    return i == n;
}

/* _nccl_layout._DEVIATION without the "*": \d+e[+-]\d+ (a lower-case e). */
static int
is_deviation(const char *s, Py_ssize_t n)
{
    Py_ssize_t i = digits(s, 0, n);
    if (i == 0 || i >= n || s[i] != 'e' || i + 1 >= n ||
        (s[i + 1] != '+' && s[i + 1] != '-'))
        return 0;
    Py_ssize_t exponent = digits(s, i + 2, n);
    return exponent > 0 && i + 2 + exponent == n;
}

static int
is_na(const char *s, Py_ssize_t n)
{
    return n == 3 && memcmp(s, "N/A", 3) == 0;
}

/* A plain non-negative integer of at most 18 significant digits, or -1. */
static long long
read_count(const char *s, Py_ssize_t n)
{
    if (n == 0 || digits(s, 0, n) != n)
        return -1;
    Py_ssize_t i = 0;
    while (i < n - 1 && s[i] == '0')
        i++;
    if (n - i > 18)
        return -1;
    long long value = 0;
    for (; i < n; i++)
        value = value * 10 + (s[i] - '0');
    return value;
}

/* Powers of ten a double holds exactly. */
static const double EXACT_POWERS[] = {
    1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
};

/* A decimal token (what is_float accepts but nan and inf) whose digits make an
 * integer of at most 2^53 and whose power of ten is within 10^±22: both are exact
 * doubles, so one IEEE multiplication or division, correctly rounded, gives the
 * double nearest the token's value, the one strtod gives (Clinger's fast path; the
 * printed values of nccl-tests are such tokens). 0: any other token. */
static int
read_decimal(const char *s, Py_ssize_t n, double *out)
{
#if defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD == 0
    Py_ssize_t i = 0;
    int negative = 0, digits_seen = 0, significant = 0;
    long scale = 0;
    unsigned long long mantissa = 0;
    if (i < n && (s[i] == '-' || s[i] == '+'))
        negative = s[i++] == '-';
    for (int fraction = 0; i < n; i++) {
        if (s[i] == '.' && !fraction) {
            fraction = 1;
            continue;
        }
        if (!is_digit(s[i]))
            break;
        digits_seen = 1;
        if (mantissa || s[i] != '0') {
            if (++significant > 19)
                return 0;
            mantissa = mantissa * 10 + (unsigned long long)(s[i] - '0');
        }
        scale -= fraction;
    }
    if (!digits_seen)
        return 0;
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        int exponent_negative = i < n && s[i] == '-';
        if (i < n && (s[i] == '-' || s[i] == '+'))
            i++;
        Py_ssize_t length = digits(s, i, n);
        if (length == 0 || length > 4)
            return 0;
        long exponent = 0;
        for (; length; length--, i++)
            exponent = exponent * 10 + (s[i] - '0');
        scale += exponent_negative ? -exponent : exponent;
    }
    if (i != n || mantissa > (1ULL << 53) || scale < -22 || scale > 22)
        return 0;
    double value = (double)mantissa;
    value = scale < 0 ? value / EXACT_POWERS[-scale] : value * EXACT_POWERS[scale];
    *out = negative ? -value : value;
    return 1;
#else
    (void)s, (void)n, (void)out;
    return 0; /* extended-precision arithmetic would round twice */
#endif
}

/* float(token) for a token is_float accepts (the parse float() itself uses). */
static int
read_float(const char *s, Py_ssize_t n, double *out)
{
    if (read_decimal(s, n, out))
        return 1;
    char buffer[128];
    if (n >= (Py_ssize_t)sizeof(buffer))
        return 0; /* no printf value is this long: the parser's to read */
    memcpy(buffer, s, (size_t)n);
    buffer[n] = '\0';
    char *end = NULL;
    double value = PyOS_string_to_double(buffer, &end, NULL);
    if (value == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    if (end != buffer + n)
        return 0;
    *out = value;
    return 1;
}

typedef struct {
    Py_ssize_t labels;
    int half[M_KINDS];
    Py_ssize_t width; /* metrics per block */
    int has[M_KINDS]; /* which metrics the block prints */
    PyObject *placements; /* tuple of str */
    Py_ssize_t blocks;
    int time_in_ms, cputime;
    PyObject *wrong_kind; /* str or None, borrowed */
    PyObject *iter_skipped; /* int or NULL */
    PyObject *dtypes; /* dict, borrowed */
} Spec;

static int
read_spec(PyObject *tuple, Spec *spec)
{
    PyObject *half, *iter_skipped;
    if (!PyArg_ParseTuple(tuple, "nO!O!ppOOO!", &spec->labels, &PyTuple_Type, &half,
                          &PyTuple_Type, &spec->placements, &spec->time_in_ms,
                          &spec->cputime, &spec->wrong_kind, &iter_skipped,
                          &PyDict_Type, &spec->dtypes))
        return -1;
    spec->width = PyTuple_GET_SIZE(half);
    spec->blocks = PyTuple_GET_SIZE(spec->placements);
    if (spec->width < 1 || spec->width > M_KINDS || spec->blocks < 1 ||
        spec->blocks > 2 || spec->labels < 0 || spec->labels > 8) {
        PyErr_SetString(PyExc_ValueError, "read_rows: unsupported layout spec");
        return -1;
    }
    memset(spec->has, 0, sizeof(spec->has));
    for (Py_ssize_t i = 0; i < spec->width; i++) {
        long code = PyLong_AsLong(PyTuple_GET_ITEM(half, i));
        if (code < 0 || code >= M_KINDS || spec->has[code]) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "read_rows: bad metric code");
            return -1;
        }
        spec->half[i] = (int)code;
        spec->has[code] = 1;
    }
    if (!spec->has[M_TIME]) {
        PyErr_SetString(PyExc_ValueError, "read_rows: a block without time");
        return -1;
    }
    for (Py_ssize_t i = 0; i < spec->blocks; i++)
        if (!PyUnicode_Check(PyTuple_GET_ITEM(spec->placements, i))) {
            PyErr_SetString(PyExc_TypeError, "read_rows: placements must be str");
            return -1;
        }
    if (spec->wrong_kind != Py_None && !PyUnicode_Check(spec->wrong_kind)) {
        PyErr_SetString(PyExc_TypeError, "read_rows: wrong_kind must be str or None");
        return -1;
    }
    spec->iter_skipped = iter_skipped == Py_None ? NULL : iter_skipped;
    return 0;
}

/* Split an ASCII line (its ending removed) into tokens; 0 when it is not one the
 * fast path reads (see the top of this part). */
static Py_ssize_t
tokenize(const char *s, Py_ssize_t n, Token *tokens)
{
    Py_ssize_t count = 0, i = 0;
    if (n == 0 || (s[0] != ' ' && s[0] != '\t'))
        return 0;
    while (i < n) {
        while (i < n && (s[i] == ' ' || s[i] == '\t'))
            i++;
        if (i == n)
            break;
        if (count == MAX_TOKENS)
            return 0;
        Py_ssize_t start = i;
        while (i < n && s[i] != ' ' && s[i] != '\t') {
            if ((unsigned char)s[i] < 0x21 || (unsigned char)s[i] > 0x7e)
                return 0;
            i++;
        }
        tokens[count].start = start;
        tokens[count].length = i - start;
        count++;
    }
    return count;
}

static int
has_text(const char *s, Py_ssize_t n, const char *needle)
{
    return find((const Py_UCS1 *)s, (size_t)n, needle, strlen(needle)) != NULL;
}

/* The type and key tokens of the last line read, and what they gave: rows repeat
 * them, so most lines make no str of their own. */
typedef struct {
    char type[16];
    Py_ssize_t type_length; /* 0: none yet */
    PyObject *dtype; /* borrowed, as Row.dtype */
    char redop_text[16];
    Py_ssize_t redop_length;
    PyObject *redop; /* a reference of its own, or NULL */
} Recent;

static void
forget(Recent *recent)
{
    Py_CLEAR(recent->redop);
}

typedef struct {
    int printed; /* 0: the block is N/A */
    int present[M_KINDS]; /* 0: the value is None (not printed, or N/A) */
    double values[M_KINDS];
    PyObject *wrong_kind; /* borrowed */
} Block;

/* One line read as the parser reads it. */
typedef struct {
    Py_ssize_t tokens;
    long long size, elements;
    PyObject *dtype; /* borrowed (a value of spec->dtypes) */
    PyObject *redop; /* new reference, or NULL for None */
    int has_root;
    long long root;
    Block blocks[2];
} Row;

/* Read one block's metric tokens; 0: the parser's to read. */
static int
read_block(const char *s, const Token *tokens, const Spec *spec, Block *block)
{
    const Token *named[M_KINDS] = {NULL};
    for (Py_ssize_t i = 0; i < spec->width; i++)
        named[spec->half[i]] = &tokens[i];
    int na[M_KINDS] = {0};
    for (int m = 0; m < M_KINDS; m++)
        if (named[m] != NULL)
            na[m] = is_na(s + named[m]->start, named[m]->length);
    memset(block, 0, sizeof(*block));
    block->printed = !(na[M_TIME] && named[M_ALGBW] && na[M_ALGBW] &&
                       named[M_BUSBW] && na[M_BUSBW]);
    if (!block->printed)
        return 1;
    if (na[M_TIME])
        return 0; /* to_float("N/A") raises: the parser names it */
    block->wrong_kind = spec->wrong_kind;
    for (int m = 0; m < M_KINDS; m++) {
        if (named[m] == NULL || na[m])
            continue;
        const char *t = s + named[m]->start;
        Py_ssize_t n = named[m]->length;
        double value;
        if (!is_float(t, n) || !read_float(t, n, &value))
            return 0;
        if (m == M_TIME && spec->time_in_ms)
            value *= 1000.0;
        if ((m == M_TIME || m == M_ALGBW || m == M_BUSBW) &&
            !(isfinite(value) && value >= 0))
            return 0; /* impossible(): the parser names it */
        if (m == M_WRONG && spec->wrong_kind == Py_None)
            block->wrong_kind = is_deviation(t, n) ? str_deviation : str_count;
        block->values[m] = value;
        block->present[m] = 1;
    }
    return 1;
}

/* Read one line into row: 1 read, 0 the parser's to read, -1 error. On 1, the
 * caller owns row->redop. */
static int
parse_line(PyObject *raw, const Spec *spec, Row *row, Recent *recent)
{
    if (!PyUnicode_Check(raw))
        return 0;
#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(raw) < 0)
        return -1;
#endif
    if (!PyUnicode_IS_ASCII(raw))
        return 0;
    Py_ssize_t n = PyUnicode_GET_LENGTH(raw);
    const char *s = (const char *)PyUnicode_1BYTE_DATA(raw);
    if (n > MAX_ROW_LINE || n == 0)
        return 0;
    /* The ending: "\n", "\r\n" or a lone "\r"; no other "\r" (a redraw). */
    if (s[n - 1] == '\n')
        n -= (n >= 2 && s[n - 2] == '\r') ? 2 : 1;
    else if (s[n - 1] == '\r')
        n -= 1;
    else
        return 0; /* cut by the end of input */
    if (memchr(s, '\r', (size_t)n) || memchr(s, '\n', (size_t)n) ||
        has_text(s, n, "CCL ") || has_text(s, n, "ailure") || has_text(s, n, "imeout"))
        return 0;
    Token tokens[MAX_TOKENS];
    Py_ssize_t count = tokenize(s, n, tokens);
    Py_ssize_t metrics = spec->width * spec->blocks;
    Py_ssize_t middle = count - metrics - 3;
    if (count == 0 || middle < 0 || middle > spec->labels)
        return 0;
    row->tokens = count;
    row->size = read_count(s + tokens[0].start, tokens[0].length);
    row->elements = read_count(s + tokens[1].start, tokens[1].length);
    if (row->size < 0 || row->elements < 0)
        return 0;
    const char *type_text = s + tokens[2].start;
    Py_ssize_t type_length = tokens[2].length;
    if (type_length == recent->type_length &&
        memcmp(type_text, recent->type, (size_t)type_length) == 0) {
        row->dtype = recent->dtype;
    }
    else {
        PyObject *type = PyUnicode_FromStringAndSize(type_text, type_length);
        if (type == NULL)
            return -1;
        /* Borrowed: spec->dtypes is _nccl_layout.DTYPES, which nothing changes. */
        row->dtype = PyDict_GetItemWithError(spec->dtypes, type);
        Py_DECREF(type);
        if (row->dtype == NULL)
            return PyErr_Occurred() ? -1 : 0;
        if (type_length < (Py_ssize_t)sizeof(recent->type)) {
            memcpy(recent->type, type_text, (size_t)type_length);
            recent->type_length = type_length;
            recent->dtype = row->dtype;
        }
    }
    row->redop = NULL;
    row->has_root = 0;
    row->root = 0;
    for (Py_ssize_t i = 3; i < 3 + middle; i++) {
        const char *t = s + tokens[i].start;
        Py_ssize_t len = tokens[i].length;
        Py_ssize_t sign = t[0] == '-';
        if (len > sign && digits(t, sign, len) == len - sign) { /* _INT: a root */
            if (len > 11)
                goto fallback;
            long long value = 0;
            for (Py_ssize_t j = sign; j < len; j++)
                value = value * 10 + (t[j] - '0');
            if (sign)
                value = -value;
            if (value < -2147483648LL || value > 2147483647LL)
                goto fallback;
            row->has_root = value >= 0;
            row->root = value;
        }
        else {
            Py_CLEAR(row->redop);
            if (len == 4 && memcmp(t, "none", 4) == 0)
                continue;
            if (recent->redop != NULL && len == recent->redop_length &&
                memcmp(t, recent->redop_text, (size_t)len) == 0) {
                row->redop = Py_NewRef(recent->redop);
                continue;
            }
            if ((row->redop = PyUnicode_FromStringAndSize(t, len)) == NULL)
                return -1;
            if (len < (Py_ssize_t)sizeof(recent->redop_text)) {
                Py_XSETREF(recent->redop, Py_NewRef(row->redop));
                memcpy(recent->redop_text, t, (size_t)len);
                recent->redop_length = len;
            }
        }
    }
    for (Py_ssize_t b = 0; b < spec->blocks; b++)
        if (!read_block(s, tokens + 3 + middle + b * spec->width, spec, &row->blocks[b]))
            goto fallback;
    return 1;
fallback:
    Py_CLEAR(row->redop);
    return 0;
}

static int
set_item(PyObject *dict, int key, PyObject *value)
{
    return PyDict_SetItem(dict, keys[key], value ? value : Py_None);
}

static int
set_number(PyObject *dict, int key, int present, double value)
{
    if (!present)
        return set_item(dict, key, NULL);
    PyObject *number = PyFloat_FromDouble(value);
    if (number == NULL)
        return -1;
    int rc = PyDict_SetItem(dict, keys[key], number);
    Py_DECREF(number);
    return rc;
}

/* A row dict of block b with every key in the order _row inserts them: the values
 * that are the same on every row of the read (placement, cputime, iter_skipped)
 * set, the others None. Each row dict is a copy of it with its own values put in
 * place, which costs much less than inserting 20 keys into a new dict (and growing
 * its table twice on the way). */
static PyObject *
row_template(const Spec *spec, Py_ssize_t b)
{
    PyObject *dict = PyDict_New();
    if (dict == NULL)
        return NULL;
    for (int key = 0; key < K_KEYS; key++) {
        PyObject *value = NULL;
        if (key == K_PLACEMENT)
            value = PyTuple_GET_ITEM(spec->placements, b);
        else if (key == K_CPUTIME)
            value = spec->cputime ? Py_True : Py_False;
        else if (key == K_ITER_SKIPPED) {
            if (spec->iter_skipped == NULL || !spec->has[M_IP99])
                break;
            value = spec->iter_skipped;
        }
        if (set_item(dict, key, value) < 0) {
            Py_DECREF(dict);
            return NULL;
        }
    }
    return dict;
}

/* The row dicts of a read line (copies of the read's templates, one a block). */
static PyObject *
row_dicts(PyObject *number, const Row *row, const Spec *spec, PyObject *const *templates)
{
    Py_ssize_t printed = 0;
    for (Py_ssize_t b = 0; b < spec->blocks; b++)
        printed += row->blocks[b].printed;
    PyObject *size = PyLong_FromLongLong(row->size);
    PyObject *count = PyLong_FromLongLong(row->elements);
    PyObject *root = row->has_root ? PyLong_FromLongLong(row->root) : Py_NewRef(Py_None);
    PyObject *dicts = PyTuple_New(printed);
    PyObject *result = NULL;
    if (size == NULL || count == NULL || root == NULL || dicts == NULL)
        goto done;
    Py_ssize_t filled = 0;
    for (Py_ssize_t b = 0; b < spec->blocks; b++) {
        const Block *block = &row->blocks[b];
        if (!block->printed)
            continue;
        PyObject *dict = PyDict_Copy(templates[b]);
        if (dict == NULL)
            goto done;
        PyTuple_SET_ITEM(dicts, filled++, dict);
        if (set_item(dict, K_LINE, number) < 0 ||
            set_item(dict, K_REPORTED, size) < 0 || set_item(dict, K_SIZE, size) < 0 ||
            set_item(dict, K_COUNT, count) < 0 ||
            set_item(dict, K_DTYPE, row->dtype) < 0 ||
            (row->redop != NULL && set_item(dict, K_REDOP, row->redop) < 0) ||
            (row->has_root && set_item(dict, K_ROOT, root) < 0))
            goto done;
        for (int m = 0; m < M_KINDS; m++)
            if (block->present[m] &&
                set_number(dict, METRIC_KEY[m], 1, block->values[m]) < 0)
                goto done;
        if (block->wrong_kind != NULL && block->wrong_kind != Py_None &&
            set_item(dict, K_WRONG_KIND, block->wrong_kind) < 0)
            goto done;
    }
    result = Py_BuildValue("(nO)", row->tokens, dicts);
done:
    Py_XDECREF(size);
    Py_XDECREF(count);
    Py_XDECREF(root);
    Py_XDECREF(dicts);
    return result;
}

/* The arguments (numbers, raws, spec, start, limit) of read_rows and
 * read_rows_columns: the lines from start on, at most limit of them, are read. */
static int
read_args(PyObject *const *args, Py_ssize_t nargs, const char *name, Spec *spec,
          Py_ssize_t *start, Py_ssize_t *stop)
{
    if (nargs != 5 || !PyList_Check(args[0]) || !PyList_Check(args[1]) ||
        !PyTuple_Check(args[2]) ||
        PyList_GET_SIZE(args[0]) != PyList_GET_SIZE(args[1])) {
        PyErr_Format(PyExc_TypeError,
                     "%s(numbers: list[int], raws: list[str], spec: tuple, start: int, "
                     "limit: int)",
                     name);
        return -1;
    }
    Py_ssize_t n = PyList_GET_SIZE(args[1]);
    Py_ssize_t first = PyLong_AsSsize_t(args[3]), limit = PyLong_AsSsize_t(args[4]);
    if ((first == -1 || limit == -1) && PyErr_Occurred())
        return -1;
    if (first < 0 || first > n || limit < 0) {
        PyErr_Format(PyExc_ValueError, "%s: start or limit out of range", name);
        return -1;
    }
    *start = first;
    *stop = limit < n - first ? first + limit : n;
    return read_spec(args[2], spec);
}

static PyObject *
read_rows(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    Spec spec;
    Py_ssize_t start, stop;
    if (read_args(args, nargs, "read_rows", &spec, &start, &stop) < 0)
        return NULL;
    PyObject *out = PyList_New(0);
    if (out == NULL)
        return NULL;
    Recent recent = {0};
    PyObject *templates[2] = {NULL, NULL}; /* made at the first row read */
    for (Py_ssize_t i = start; i < stop; i++) {
        Row row;
        int read = parse_line(PyList_GET_ITEM(args[1], i), &spec, &row, &recent);
        PyObject *item = NULL;
        if (read == 1 && templates[0] == NULL) {
            for (Py_ssize_t b = 0; b < spec.blocks && read == 1; b++)
                if ((templates[b] = row_template(&spec, b)) == NULL)
                    read = -1;
            if (read < 0)
                Py_CLEAR(row.redop);
        }
        if (read == 1) {
            item = row_dicts(PyList_GET_ITEM(args[0], i), &row, &spec, templates);
            Py_XDECREF(row.redop);
        }
        else if (read == 0) {
            item = Py_NewRef(Py_None);
        }
        if (item == NULL || PyList_Append(out, item) < 0) {
            Py_XDECREF(item);
            Py_CLEAR(out);
            break;
        }
        Py_DECREF(item);
        if (read == 0)
            break; /* the parser reads it, and may change what the rest means */
    }
    Py_XDECREF(templates[0]);
    Py_XDECREF(templates[1]);
    forget(&recent);
    return out;
}

/* --- the same rows as columns (read_rows_columns) -------------------------- */

typedef struct {
    char *data;
    size_t length, capacity;
} Buffer;

/* Make room in buffer for size more bytes; -1 out of memory (set). */
static int
make_room(Buffer *buffer, size_t size)
{
    size_t capacity = buffer->capacity ? buffer->capacity * 2 : 4096;
    while (capacity < buffer->length + size)
        capacity *= 2;
    char *data = PyMem_Realloc(buffer->data, capacity);
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    buffer->data = data;
    buffer->capacity = capacity;
    return 0;
}

/* Append size bytes (inlined: a row puts some fifty values). */
static inline int
put(Buffer *buffer, const void *value, size_t size)
{
    if (buffer->length + size > buffer->capacity && make_room(buffer, size) < 0)
        return -1;
    memcpy(buffer->data + buffer->length, value, size);
    buffer->length += size;
    return 0;
}

static PyObject *
take_bytes(Buffer *buffer)
{
    PyObject *bytes = PyBytes_FromStringAndSize(buffer->data ? buffer->data : "",
                                                (Py_ssize_t)buffer->length);
    PyMem_Free(buffer->data);
    buffer->data = NULL;
    buffer->length = buffer->capacity = 0;
    return bytes;
}

/* Columns of the rows, in row order: C values, and validity (one byte a value). */
enum {
    C_FIELDS, C_ENDS, C_LINE, C_SIZE, C_COUNT, C_ROOT, C_ROOT_VALID, C_METRICS,
    C_BUFFERS = C_METRICS + 2 * M_KINDS
};
/* The string columns, each as its distinct values (a dict of value to code, in
 * order of first appearance) and a code per row (int32): they hold a few values. */
enum { S_PLACEMENT, S_DTYPE, S_REDOP, S_WRONG_KIND, S_LISTS };

typedef struct {
    PyObject *codes_of; /* dict: value -> code */
    Buffer codes;
    /* The last two values coded and their codes: rows repeat them (placements
     * alternate), so most take no dict look-up. Strong references: a value equal
     * to a key is not the key, and once freed its address may be a new value's. */
    PyObject *recent[2];
    int32_t recent_codes[2];
} Strings;

static void
forget_strings(Strings *column)
{
    Py_CLEAR(column->recent[0]);
    Py_CLEAR(column->recent[1]);
    Py_CLEAR(column->codes_of);
    PyMem_Free(column->codes.data);
    column->codes.data = NULL;
}

static int
put_string(Strings *column, PyObject *value)
{
    for (int r = 0; r < 2; r++)
        if (column->recent[r] == value)
            return put(&column->codes, &column->recent_codes[r], 4);
    PyObject *known = PyDict_GetItemWithError(column->codes_of, value); /* borrowed */
    long code;
    if (known != NULL) {
        code = PyLong_AsLong(known);
    }
    else {
        if (PyErr_Occurred())
            return -1;
        code = (long)PyDict_GET_SIZE(column->codes_of);
        PyObject *number = PyLong_FromLong(code);
        int rc = number ? PyDict_SetItem(column->codes_of, value, number) : -1;
        Py_XDECREF(number);
        if (rc < 0)
            return -1;
    }
    int32_t stored = (int32_t)code;
    Py_XDECREF(column->recent[1]);
    column->recent[1] = column->recent[0];
    column->recent_codes[1] = column->recent_codes[0];
    column->recent[0] = Py_NewRef(value);
    column->recent_codes[0] = stored;
    return put(&column->codes, &stored, 4);
}

static int
append_row(Buffer *buffers, Strings *strings, long long line, const Row *row,
           const Spec *spec)
{
    for (Py_ssize_t b = 0; b < spec->blocks; b++) {
        const Block *block = &row->blocks[b];
        if (!block->printed)
            continue;
        int root = (int)row->root;
        char valid = (char)row->has_root;
        if (put(&buffers[C_LINE], &line, 8) < 0 ||
            put(&buffers[C_SIZE], &row->size, 8) < 0 ||
            put(&buffers[C_COUNT], &row->elements, 8) < 0 ||
            put(&buffers[C_ROOT], &root, 4) < 0 ||
            put(&buffers[C_ROOT_VALID], &valid, 1) < 0)
            return -1;
        for (int m = 0; m < M_KINDS; m++) {
            char present = (char)block->present[m];
            double value = present ? block->values[m] : 0.0;
            if (put(&buffers[C_METRICS + 2 * m], &value, 8) < 0 ||
                put(&buffers[C_METRICS + 2 * m + 1], &present, 1) < 0)
                return -1;
        }
        PyObject *redop = row->redop ? row->redop : Py_None;
        if (put_string(&strings[S_PLACEMENT], PyTuple_GET_ITEM(spec->placements, b)) <
                0 ||
            put_string(&strings[S_DTYPE], row->dtype) < 0 ||
            put_string(&strings[S_REDOP], redop) < 0 ||
            put_string(&strings[S_WRONG_KIND],
                       block->wrong_kind ? block->wrong_kind : Py_None) < 0)
            return -1;
    }
    return 0;
}

static PyObject *
read_rows_columns(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    Spec spec;
    Py_ssize_t start, stop;
    if (read_args(args, nargs, "read_rows_columns", &spec, &start, &stop) < 0)
        return NULL;
    Buffer buffers[C_BUFFERS];
    Strings strings[S_LISTS];
    Recent recent = {0};
    PyObject *result = NULL;
    memset(buffers, 0, sizeof(buffers));
    memset(strings, 0, sizeof(strings));
    for (int i = 0; i < S_LISTS; i++)
        if ((strings[i].codes_of = PyDict_New()) == NULL)
            goto done;
    long long rows = 0;
    for (Py_ssize_t i = start; i < stop; i++) {
        Row row;
        int read = parse_line(PyList_GET_ITEM(args[1], i), &spec, &row, &recent);
        if (read < 0)
            goto done;
        unsigned char fields = 0;
        if (read == 1) {
            long long line = PyLong_AsLongLong(PyList_GET_ITEM(args[0], i));
            int appended = line == -1 && PyErr_Occurred()
                               ? -1
                               : append_row(buffers, strings, line, &row, &spec);
            Py_XDECREF(row.redop);
            if (appended < 0)
                goto done;
            fields = (unsigned char)row.tokens; /* at most MAX_TOKENS */
            rows += row.blocks[0].printed + (spec.blocks > 1 && row.blocks[1].printed);
        }
        if (put(&buffers[C_FIELDS], &fields, 1) < 0 ||
            put(&buffers[C_ENDS], &rows, 8) < 0)
            goto done;
        if (read == 0)
            break; /* as in read_rows */
    }
    /* The buffers, then per string column its distinct values and codes. */
    result = PyTuple_New(C_BUFFERS + 2 * S_LISTS);
    if (result == NULL)
        goto done;
    for (int i = 0; i < C_BUFFERS + 2 * S_LISTS; i++) {
        int column = (i - C_BUFFERS) / 2;
        PyObject *item = i < C_BUFFERS ? take_bytes(&buffers[i])
                         : (i - C_BUFFERS) % 2 == 0
                             ? PyDict_Keys(strings[column].codes_of)
                             : take_bytes(&strings[column].codes);
        if (item == NULL) {
            Py_CLEAR(result);
            goto done;
        }
        PyTuple_SET_ITEM(result, i, item);
    }
done:
    forget(&recent);
    for (int i = 0; i < C_BUFFERS; i++)
        PyMem_Free(buffers[i].data);
    for (int i = 0; i < S_LISTS; i++)
        forget_strings(&strings[i]);
    return result;
}

/* --- columns of row dicts (dict_columns) -----------------------------------
 * dict_columns(rows, names, kinds, defaults): the columns of a list of row dicts
 * as _model.Collector builds them (row.get(name, default)), for the column kinds
 * arrays.array builds from buffers: per column, by its kind (a byte of kinds)
 *   D_INT64, D_INT32: (int64 or int32 values, a byte per value: present);
 *   D_DOUBLE: (double values, present); D_BOOL: (a byte per value: 1 for True,
 *   present);
 *   D_STRING: (its distinct values in order of first appearance, int32 codes);
 *   D_NULLS (any other type): () when every value is None;
 * or None when the column holds a value of another type than array() builds it
 * from (exactly int, int or float, bool, str; or None), an integer beyond the
 * type or a str UTF-8 cannot encode, and for D_OTHER: the caller builds those
 * columns as before. */
enum { D_OTHER, D_INT64, D_INT32, D_DOUBLE, D_BOOL, D_STRING, D_NULLS };

/* One value into the buffers of its column; 0: not a value of the kind. */
static int
put_value(int kind, PyObject *value, Buffer *data, Buffer *present, Strings *strings)
{
    char there = value != Py_None;
    if (kind == D_STRING) {
        if (there && !PyUnicode_CheckExact(value))
            return 0;
        if (there && PyUnicode_AsUTF8AndSize(value, NULL) == NULL) {
            PyErr_Clear(); /* a lone surrogate: array() raises its own error */
            return 0;
        }
        return put_string(strings, value) < 0 ? -1 : 1;
    }
    if (put(present, &there, 1) < 0)
        return -1;
    if (kind == D_DOUBLE) {
        double number = 0.0;
        if (there && PyFloat_CheckExact(value)) {
            number = PyFloat_AS_DOUBLE(value);
        }
        else if (there) {
            if (!PyLong_CheckExact(value))
                return 0;
            number = PyLong_AsDouble(value);
            if (number == -1.0 && PyErr_Occurred()) {
                PyErr_Clear(); /* too large: array() says so its own way */
                return 0;
            }
        }
        return put(data, &number, 8) < 0 ? -1 : 1;
    }
    if (kind == D_BOOL) {
        if (there && value != Py_True && value != Py_False)
            return 0;
        char truth = value == Py_True;
        return put(data, &truth, 1) < 0 ? -1 : 1;
    }
    long long number = 0;
    if (there) {
        int overflow = 0;
        if (!PyLong_CheckExact(value))
            return 0;
        number = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (overflow || (number == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            return 0;
        }
    }
    if (kind == D_INT32) {
        if (number < INT32_MIN || number > INT32_MAX)
            return 0;
        int32_t narrow = (int32_t)number;
        return put(data, &narrow, 4) < 0 ? -1 : 1;
    }
    return put(data, &number, 8) < 0 ? -1 : 1;
}

/* One column being built: its name, kind and default; whether it is still built
 * (a value of another type leaves it to the caller), and its buffers. */
typedef struct {
    PyObject *name, *fallback; /* borrowed */
    int kind, building;
    Buffer data, present;
    Strings strings;
} DictColumn;

static void
forget_column(DictColumn *column)
{
    PyMem_Free(column->data.data);
    PyMem_Free(column->present.data);
    column->data.data = column->present.data = NULL;
    forget_strings(&column->strings);
}

/* The finished column: its tuple (see above), Py_None, or NULL (an error is set). */
static PyObject *
column_result(DictColumn *column)
{
    if (!column->building)
        return Py_NewRef(Py_None);
    if (column->kind == D_NULLS)
        return PyTuple_New(0);
    if (column->kind == D_STRING) {
        PyObject *distinct = PyDict_Keys(column->strings.codes_of);
        PyObject *codes = distinct ? take_bytes(&column->strings.codes) : NULL;
        PyObject *result = codes ? PyTuple_Pack(2, distinct, codes) : NULL;
        Py_XDECREF(distinct);
        Py_XDECREF(codes);
        return result;
    }
    PyObject *values = take_bytes(&column->data);
    PyObject *there = values ? take_bytes(&column->present) : NULL;
    PyObject *result = there ? PyTuple_Pack(2, values, there) : NULL;
    Py_XDECREF(values);
    Py_XDECREF(there);
    return result;
}

/* One value into its column, if still built; -1: an error is set. */
static int
put_column(DictColumn *column, PyObject *value)
{
    if (!column->building)
        return 0;
    int ok = column->kind == D_NULLS
                 ? value == Py_None
                 : put_value(column->kind, value, &column->data, &column->present,
                             &column->strings);
    if (ok < 0)
        return -1;
    if (ok == 0) {
        column->building = 0;
        forget_column(column);
    }
    return 0;
}

/* One row's values into every column still built, each looked up by its name;
 * -1: an error is set. */
static int
put_row_by_name(PyObject *row, DictColumn *columns, Py_ssize_t n)
{
    for (Py_ssize_t c = 0; c < n; c++) {
        DictColumn *column = &columns[c];
        if (!column->building)
            continue;
        PyObject *value = PyDict_GetItemWithError(row, column->name); /* borrowed */
        if (value == NULL && PyErr_Occurred())
            return -1;
        if (put_column(column, value ? value : column->fallback) < 0)
            return -1;
    }
    return 0;
}

/* Rows made alike (read_rows' copies of one template, the parser's row literals)
 * hold the same keys in the same order: each row is read in one pass over its
 * entries, each key's column remembered by its position, instead of one look-up
 * of every column's name (a row has some twenty keys, the columns are thirty).
 * The same values as put_row_by_name: row.get(name, default) for each column. */
#define ORDER_SLOTS 64
typedef struct {
    PyObject *index_of;             /* column name -> its index (a dict) */
    PyObject *keys[ORDER_SLOTS];    /* the key at each position (own references) */
    Py_ssize_t columns[ORDER_SLOTS]; /* its column, -1: none */
    Py_ssize_t *seen;               /* per column: the last row that held it */
} KeyOrder;

static void
forget_order(KeyOrder *order)
{
    Py_CLEAR(order->index_of);
    for (int i = 0; i < ORDER_SLOTS; i++)
        Py_CLEAR(order->keys[i]);
    PyMem_Free(order->seen);
    order->seen = NULL;
}

/* The column of the key at position i of a row; -2: not a plain str (the row is
 * read by name), -3: an error is set. */
static Py_ssize_t
column_at(KeyOrder *order, Py_ssize_t i, PyObject *key)
{
    if (order->keys[i] == key)
        return order->columns[i];
    if (!PyUnicode_CheckExact(key))
        return -2; /* its __eq__ and __hash__ are its own: looked up as before */
    PyObject *index = PyDict_GetItemWithError(order->index_of, key); /* borrowed */
    if (index == NULL && PyErr_Occurred())
        return -3;
    Py_ssize_t column = index ? PyLong_AsSsize_t(index) : -1;
    Py_XSETREF(order->keys[i], Py_NewRef(key));
    order->columns[i] = column;
    return column;
}

/* One row's values into every column still built; -1: an error is set. */
static int
put_row(PyObject *row, DictColumn *columns, Py_ssize_t n, KeyOrder *order,
        Py_ssize_t stamp)
{
    Py_ssize_t size = PyDict_GET_SIZE(row);
    if (order->index_of == NULL || size > ORDER_SLOTS)
        return put_row_by_name(row, columns, n);
    /* Every entry's column first: no value is put unless the row reads this way. */
    Py_ssize_t where[ORDER_SLOTS];
    PyObject *values[ORDER_SLOTS]; /* borrowed: the row is not changed meanwhile */
    Py_ssize_t pos = 0, i = 0;
    PyObject *key, *value;
    while (i < size && PyDict_Next(row, &pos, &key, &value)) {
        Py_ssize_t column = column_at(order, i, key);
        if (column == -3)
            return -1;
        if (column == -2)
            return put_row_by_name(row, columns, n);
        where[i] = column;
        values[i++] = value;
    }
    for (Py_ssize_t k = 0; k < i; k++) {
        if (where[k] < 0)
            continue;
        order->seen[where[k]] = stamp;
        if (put_column(&columns[where[k]], values[k]) < 0)
            return -1;
    }
    for (Py_ssize_t c = 0; c < n; c++)
        if (order->seen[c] != stamp && put_column(&columns[c], columns[c].fallback) < 0)
            return -1;
    return 0;
}

/* Row by row, each row's values into every column (a row dict is read while it is
 * in the cache: column by column, the rows of a batch were read from memory once a
 * column, most of the time this took). */
static PyObject *
dict_columns(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 4 || !PyList_Check(args[0]) || !PyTuple_Check(args[1]) ||
        !PyBytes_Check(args[2]) || !PyTuple_Check(args[3]) ||
        PyTuple_GET_SIZE(args[1]) != PyBytes_GET_SIZE(args[2]) ||
        PyTuple_GET_SIZE(args[1]) != PyTuple_GET_SIZE(args[3])) {
        PyErr_SetString(PyExc_TypeError,
                        "dict_columns(rows: list[dict], names: tuple[str, ...], "
                        "kinds: bytes, defaults: tuple) (one kind and default a name)");
        return NULL;
    }
    PyObject *rows = args[0];
    Py_ssize_t n = PyTuple_GET_SIZE(args[1]);
    DictColumn *columns = PyMem_Calloc((size_t)(n ? n : 1), sizeof(DictColumn));
    if (columns == NULL)
        return PyErr_NoMemory();
    PyObject *out = NULL;
    KeyOrder order = {0};
    if ((order.seen = PyMem_Calloc((size_t)(n ? n : 1), sizeof(Py_ssize_t))) == NULL ||
        (order.index_of = PyDict_New()) == NULL) {
        forget_order(&order);
        PyMem_Free(columns);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t c = 0; c < n; c++) {
        DictColumn *column = &columns[c];
        column->name = PyTuple_GET_ITEM(args[1], c);
        column->fallback = PyTuple_GET_ITEM(args[3], c);
        column->kind = (unsigned char)PyBytes_AS_STRING(args[2])[c];
        column->building = column->kind != D_OTHER;
        if (column->building && column->kind == D_STRING &&
            (column->strings.codes_of = PyDict_New()) == NULL)
            goto done;
        PyObject *index = PyLong_FromSsize_t(c);
        int rc = index && PyUnicode_CheckExact(column->name)
                     ? PyDict_SetItem(order.index_of, column->name, index)
                     : 0;
        Py_XDECREF(index);
        if (index == NULL || rc < 0)
            goto done;
    }
    /* Names not all plain and distinct: every row is read by name. */
    if (PyDict_GET_SIZE(order.index_of) != n)
        Py_CLEAR(order.index_of);
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(rows); i++) {
        /* A reference of its own: a value's __eq__ could change the list. */
        PyObject *row = Py_NewRef(PyList_GET_ITEM(rows, i));
        int rc = 0;
        if (PyDict_CheckExact(row)) {
            rc = put_row(row, columns, n, &order, i + 1);
        }
        else { /* a row of another type: every column is the caller's */
            for (Py_ssize_t c = 0; c < n; c++)
                columns[c].building = 0;
        }
        Py_DECREF(row);
        if (rc < 0)
            goto done;
    }
    if ((out = PyList_New(n)) == NULL)
        goto done;
    for (Py_ssize_t c = 0; c < n; c++) {
        PyObject *column = column_result(&columns[c]);
        if (column == NULL) {
            Py_CLEAR(out);
            goto done;
        }
        PyList_SET_ITEM(out, c, column);
    }
done:
    for (Py_ssize_t c = 0; c < n; c++)
        forget_column(&columns[c]);
    PyMem_Free(columns);
    forget_order(&order);
    return out;
}

static PyMethodDef methods[] = {
    {"scan_block", (PyCFunction)(void (*)(void))scan_block, METH_FASTCALL,
     "scan_block(block, end) -> (lines, kept indices, kept starts, kept texts, "
     "facts)"},
    {"scan_bytes", (PyCFunction)(void (*)(void))scan_bytes, METH_FASTCALL,
     "scan_bytes(block, end) -> scan_block's result for UTF-8 bytes"},
    {"dict_columns", (PyCFunction)(void (*)(void))dict_columns, METH_FASTCALL,
     "dict_columns(rows, names, kinds, defaults) -> per column its buffers or None"},
    {"read_rows", (PyCFunction)(void (*)(void))read_rows, METH_FASTCALL,
     "read_rows(numbers, raws, spec) -> per line (tokens, row dicts) or None"},
    {"read_rows_columns", (PyCFunction)(void (*)(void))read_rows_columns,
     METH_FASTCALL,
     "read_rows_columns(numbers, raws, spec) -> the same rows as column buffers"},
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
    for (int i = 0; i < K_KEYS; i++) /* once per process: the module is -1 */
        if (keys[i] == NULL && (keys[i] = PyUnicode_InternFromString(KEY_NAMES[i])) == NULL)
            return NULL;
    if ((str_count == NULL &&
         (str_count = PyUnicode_InternFromString("count")) == NULL) ||
        (str_deviation == NULL &&
         (str_deviation = PyUnicode_InternFromString("max_deviation")) == NULL))
        return NULL;
    return PyModule_Create(&module);
}
