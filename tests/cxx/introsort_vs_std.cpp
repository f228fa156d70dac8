// Compares ms_introsort (policies/lib/introsort.c) with this compiler's
// std::sort on seeded random inputs: n from 1 to 600, few distinct keys,
// presorted, reverse-sorted, organ-pipe, sawtooth and all-equal inputs, both comparators of the
// systems (key[i] > key[j] and key[i] < key[j]).  Every output permutation
// must be identical.  Built only when CMake finds a C++ compiler
// (tests/cxx.cmake); libstdc++ has used this introsort since GCC 4.9.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

extern "C" {
#include "policies/lib/introsort.h"
}

static int check(const std::vector<uint64_t> &key, bool greater, const char *what)
{
    size_t n = key.size();
    std::vector<uint32_t> a(n), b(n);
    std::iota(a.begin(), a.end(), 0u);
    std::iota(b.begin(), b.end(), 0u);
    if (greater)
        std::sort(a.begin(), a.end(), [&](uint32_t i, uint32_t j) { return key[i] > key[j]; });
    else
        std::sort(a.begin(), a.end(), [&](uint32_t i, uint32_t j) { return key[i] < key[j]; });
    ms_introsort(b.data(), n, greater ? ms_introsort_key_greater : ms_introsort_key_less, key.data());
    if (a != b) {
        std::fprintf(stderr, "mismatch: %s n=%zu comparator %s\n", what, n, greater ? ">" : "<");
        return 1;
    }
    return 0;
}

int main()
{
    std::mt19937_64 rng(16);
    int bad = 0, cases = 0;
    for (size_t n = 1; n <= 600; n += (n < 70 ? 1 : 7)) {
        for (int kind = 0; kind < 7; kind++) {
            std::vector<uint64_t> key(n);
            for (size_t i = 0; i < n; i++) {
                switch (kind) {
                case 0: key[i] = 0; break;                      // all equal
                case 1: key[i] = rng() % 3; break;              // few distinct
                case 2: key[i] = rng() % (n + 1); break;        // many distinct
                case 3: key[i] = i / 4; break;                  // presorted with ties
                case 4: key[i] = (n - i) / 3; break;            // reverse with ties
                case 5: key[i] = i < n / 2 ? i : n - i; break;   // organ pipe
                default: key[i] = i % 8; break;                 // sawtooth
                }
            }
            for (int g = 0; g < 2; g++, cases++)
                bad += check(key, g == 1, kind == 0 ? "equal" : kind == 1 ? "few" : kind == 2 ? "many" : kind == 3 ? "sorted" : kind == 4 ? "reverse" : kind == 5 ? "organ" : "saw");
        }
    }
    std::printf("%d cases, %d mismatches\n", cases, bad);
    return bad ? 1 : 0;
}
