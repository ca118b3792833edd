// Closes the region cpu/isa_target_begin.h opened: the functions after it are baseline again.
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif
#undef MDL_ISA_TARGET
