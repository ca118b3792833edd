// Compiles the functions that follow, up to cpu/isa_target_end.h, for the instruction sets that
// MDL_ISA_TARGET names (a string: "avx512f,avx512bw"), so that one file holds one ISA's kernels and
// the rest of the build stays baseline x86-64: GCC's push_options and target pragmas, or clang's
// attribute push. The file defines MDL_ISA_TARGET just before including this, after its own
// headers, whose inline functions must stay baseline. GCC 12 takes the _mm512_undefined_*() inside
// its own intrinsics for uninitialised reads (PR 105593, fixed in GCC 13): those warnings are off
// in the region. No include guard: each region opens with it.
#ifndef MDL_ISA_TARGET
#error "cpu/isa_target_begin.h: define MDL_ISA_TARGET (\"avx2,fma\", \"avx512f\", ...) first"
#endif
#define MDL_ISA_PRAGMA(text) _Pragma(#text)
#if defined(__clang__)
#define MDL_ISA_PUSH(isa) MDL_ISA_PRAGMA(clang attribute push(__attribute__((target(isa))), apply_to = function))
#else
#pragma GCC push_options
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#define MDL_ISA_PUSH(isa) MDL_ISA_PRAGMA(GCC target(isa))
#endif
MDL_ISA_PUSH(MDL_ISA_TARGET)
#undef MDL_ISA_PUSH
