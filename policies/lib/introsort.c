/* libstdc++'s std::sort in C (introsort.h).  Each function names the
 * libstdc++ routine it follows (GCC 12 bits/stl_algo.h, bits/stl_heap.h);
 * indices are ptrdiff_t-like offsets into the array. */
#include "policies/lib/introsort.h"

enum { THRESHOLD = 16 }; /* _S_threshold */

typedef struct {
    uint32_t *a;
    ms_introsort_less less;
    const void *ctx;
} sorter;

static int lt(const sorter *s, uint32_t x, uint32_t y) { return s->less(x, y, s->ctx); }

static void swap_at(uint32_t *a, size_t i, size_t j)
{
    uint32_t t = a[i];
    a[i] = a[j];
    a[j] = t;
}

/* __lg: floor(log2 n), n > 0 */
static size_t floor_log2(size_t n)
{
    size_t k = 0;
    while (n >>= 1)
        k++;
    return k;
}

/* ---- heap (stl_heap.h) ---- */

/* __push_heap(first, hole, top, value) */
static void push_heap(const sorter *s, size_t first, size_t hole, size_t top, uint32_t value)
{
    uint32_t *a = s->a;
    size_t parent = (hole - 1) / 2;
    while (hole > top && lt(s, a[first + parent], value)) {
        a[first + hole] = a[first + parent];
        hole = parent;
        parent = (hole - 1) / 2;
    }
    a[first + hole] = value;
}

/* __adjust_heap(first, hole, len, value) */
static void adjust_heap(const sorter *s, size_t first, size_t hole, size_t len, uint32_t value)
{
    uint32_t *a = s->a;
    size_t top = hole, child = hole;
    while (len > 0 && child < (len - 1) / 2) {
        child = 2 * (child + 1);
        if (lt(s, a[first + child], a[first + child - 1]))
            child--;
        a[first + hole] = a[first + child];
        hole = child;
    }
    if ((len & 1) == 0 && child == (len - 2) / 2) {
        child = 2 * (child + 1);
        a[first + hole] = a[first + child - 1];
        hole = child - 1;
    }
    push_heap(s, first, hole, top, value);
}

/* __make_heap(first, last) */
static void make_heap(const sorter *s, size_t first, size_t last)
{
    size_t len = last - first;
    if (len < 2)
        return;
    for (size_t parent = (len - 2) / 2;; parent--) {
        adjust_heap(s, first, parent, len, s->a[first + parent]);
        if (parent == 0)
            return;
    }
}

/* __sort_heap(first, last), with __pop_heap(first, last, last) */
static void sort_heap(const sorter *s, size_t first, size_t last)
{
    uint32_t *a = s->a;
    while (last - first > 1) {
        --last;
        uint32_t value = a[last];
        a[last] = a[first];
        adjust_heap(s, first, 0, last - first, value);
    }
}

/* ---- introsort loop (stl_algo.h) ---- */

/* __move_median_to_first(result, a, b, c) */
static void move_median_to_first(const sorter *s, size_t result, size_t x, size_t y, size_t z)
{
    const uint32_t *a = s->a;
    if (lt(s, a[x], a[y])) {
        if (lt(s, a[y], a[z]))
            swap_at(s->a, result, y);
        else if (lt(s, a[x], a[z]))
            swap_at(s->a, result, z);
        else
            swap_at(s->a, result, x);
    } else if (lt(s, a[x], a[z]))
        swap_at(s->a, result, x);
    else if (lt(s, a[y], a[z]))
        swap_at(s->a, result, z);
    else
        swap_at(s->a, result, y);
}

/* __unguarded_partition(first, last, pivot) */
static size_t unguarded_partition(const sorter *s, size_t first, size_t last, size_t pivot)
{
    const uint32_t *a = s->a;
    for (;;) {
        while (lt(s, a[first], a[pivot]))
            ++first;
        --last;
        while (lt(s, a[pivot], a[last]))
            --last;
        if (!(first < last))
            return first;
        swap_at(s->a, first, last);
        ++first;
    }
}

/* __unguarded_partition_pivot(first, last) */
static size_t partition_pivot(const sorter *s, size_t first, size_t last)
{
    size_t mid = first + (last - first) / 2;
    move_median_to_first(s, first, first + 1, mid, last - 1);
    return unguarded_partition(s, first + 1, last, first);
}

/* __introsort_loop(first, last, depth_limit) */
static void introsort_loop(const sorter *s, size_t first, size_t last, size_t depth)
{
    while (last - first > THRESHOLD) {
        if (depth == 0) { /* __partial_sort(first, last, last) = make_heap + sort_heap */
            make_heap(s, first, last);
            sort_heap(s, first, last);
            return;
        }
        --depth;
        size_t cut = partition_pivot(s, first, last);
        introsort_loop(s, cut, last, depth);
        last = cut;
    }
}

/* ---- final insertion sort ---- */

/* __unguarded_linear_insert(last) */
static void unguarded_linear_insert(const sorter *s, size_t last)
{
    uint32_t *a = s->a;
    uint32_t value = a[last];
    size_t next = last - 1;
    while (lt(s, value, a[next])) {
        a[last] = a[next];
        last = next;
        --next;
    }
    a[last] = value;
}

/* __insertion_sort(first, last) */
static void insertion_sort(const sorter *s, size_t first, size_t last)
{
    uint32_t *a = s->a;
    if (first == last)
        return;
    for (size_t i = first + 1; i != last; ++i) {
        if (lt(s, a[i], a[first])) {
            uint32_t value = a[i];
            for (size_t j = i; j > first; j--) /* move_backward(first, i, i + 1) */
                a[j] = a[j - 1];
            a[first] = value;
        } else {
            unguarded_linear_insert(s, i);
        }
    }
}

/* __final_insertion_sort(first, last) */
static void final_insertion_sort(const sorter *s, size_t first, size_t last)
{
    if (last - first > THRESHOLD) {
        insertion_sort(s, first, first + THRESHOLD);
        for (size_t i = first + THRESHOLD; i != last; ++i) /* __unguarded_insertion_sort */
            unguarded_linear_insert(s, i);
    } else {
        insertion_sort(s, first, last);
    }
}

void ms_introsort(uint32_t *a, size_t n, ms_introsort_less less, const void *ctx)
{
    if (n == 0)
        return;
    sorter s = {a, less, ctx};
    introsort_loop(&s, 0, n, 2 * floor_log2(n));
    final_insertion_sort(&s, 0, n);
}

int ms_introsort_key_greater(uint32_t a, uint32_t b, const void *ctx)
{
    const uint64_t *key = ctx;
    return key[a] > key[b];
}

int ms_introsort_key_less(uint32_t a, uint32_t b, const void *ctx)
{
    const uint64_t *key = ctx;
    return key[a] < key[b];
}
