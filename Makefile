# mdl: one Makefile for the library, tests, benchmarks and tools.
#   make            $(BUILD)/libmdl.a, the tests, the benchmarks, the tools, the examples
#   make examples   examples/*.cpp into $(BUILD)/examples/   make run-examples   run each at a tiny size
#   make check-install  install into a temporary prefix and build an example there with pkg-config
#   make test       build and run every test          make bench   build and run the benchmarks
#   make bench-record  keep the last make bench as this machine kind's figures in bench/RESULTS.md
#   make bench-check   each benchmark the switch list names exists   make docs   write docs/OPTIMIZATIONS.md
#   make deps       install the Debian packages        make install PREFIX=/usr/local
#   make study      the optimization study: reports/study.md   make clean   remove build/
#   make bench-dist all_reduce bandwidth and SimpleCNN scaling at 1 and 2 ranks (MPI builds)
#   make print-build  the configuration's folder (build/latest links to the last one built)
#   make roofline   this machine's ceilings (peak FLOP/s, bandwidth) for the profiler's roofline: $(BUILD)/roofline.json
#   make roofline-check  mdl-roofline's FMA peak and triad bandwidth against a hand-written FMA loop and triad
#                      ($(BUILD)/roofline-check.json; bench/results.py record-check keeps it in bench/RESULTS.md)
#   make format     clang-format every source in place    make format-check   the same, as a check
#   make compile_commands.json   the compile commands of this configuration, for editors
#   make gpu-check  build and run the CUDA tests and benchmarks here (a GPU machine with a toolchain)
#   make gpu-bundle the same binaries packed for a bare GPU machine: build/gpu-bundle/mdl-gpu.tar.xz
#   make fuzz FUZZ_SECONDS=N   build the libFuzzer harnesses (clang++-14) and run each for N seconds, one table
#   make fuzz-replay SANITIZE=address,undefined   each harness once on its seed corpus, g++ and no libFuzzer
#   test, bench, bench-dist and study install the Debian packages first when the list changed;
#   run-tests, run-benches, run-bench-dist and run-study skip that step.
# Switches: CUDA=auto|0|1  MPI=auto|0|1  NCCL=auto|0|1  SANITIZE=address,undefined|thread  DEBUG=1  MDL_CUDA_ARCH="80 90"
#           WERROR=1 (warnings fail the build; CI)  BUILD=path (another folder)
#           CUDA_COMPILE_CHECK=1 (the .cu files unoptimised: a compile check, as CI makes where no GPU runs them)
#           CUDNN_HOME=, NCCL_HOME= where cuDNN or NCCL live outside the CUDA toolkit (include/, lib/)

# Parallel by default: with no -j given (on the command line or in MAKEFLAGS), every core builds
# (GNU make 4.3 shows no -j in $(MAKEFLAGS) while it reads the makefile, hence the look at its own
# command line). Sub-makes share the top one's job slots; `make clean ...` stays serial.
ifeq ($(MAKELEVEL)$(filter -j%,$(MAKEFLAGS))$(filter clean,$(MAKECMDGOALS)),0)
  ifeq ($(shell tr '\0' '\n' < /proc/$$PPID/cmdline 2>/dev/null | grep -E -- '^(-[a-zA-Z]*j|--jobs)'; \
          printenv MAKEFLAGS | grep -E -- '(^| )-?[a-zA-Z]*j'),)
    MAKEFLAGS += -j$(shell nproc)
  endif
endif

CXX      ?= g++
CUDA     ?= auto
MPI      ?= auto
NCCL     ?= auto
PREFIX   ?= /usr/local
SANITIZE ?=
DEBUG    ?=
WERROR   ?=

NVCC := $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
# nvcc may be a wrapper script outside the toolkit (/usr/local/bin/nvcc), so the toolkit
# is /usr/local/cuda when that exists, and libcudart is looked for where toolkits put it.
CUDA_HOME_FOUND := $(if $(wildcard /usr/local/cuda/bin/nvcc),/usr/local/cuda,$(patsubst %/bin/nvcc,%,$(NVCC)))
CUDA_HOME ?= $(CUDA_HOME_FOUND)
CUDA_LIBDIR := $(patsubst %/,%,$(dir $(firstword $(wildcard $(foreach d,lib64 lib targets/x86_64-linux/lib,$(CUDA_HOME)/$(d)/libcudart.so) /usr/lib/x86_64-linux-gnu/libcudart.so))))
ifeq ($(CUDA),auto)
  WITH_CUDA := $(if $(and $(NVCC),$(CUDA_LIBDIR)),1,0)
else
  WITH_CUDA := $(CUDA)
endif
ifeq ($(WITH_CUDA),1)
  ifeq ($(NVCC),)
    $(error CUDA=1 but nvcc was not found)
  endif
  ifeq ($(CUDA_LIBDIR),)
    $(error CUDA=1 but libcudart.so was not found under $(CUDA_HOME); set CUDA_HOME=)
  endif
endif

# cuDNN and NCCL may live outside the toolkit (pip's nvidia-* wheels hold them with no unversioned
# libNAME.so), so each is linked by its file: the first libNAME.so or libNAME.so.N found.
CUDNN_HOME ?= $(CUDA_HOME)
NCCL_HOME  ?= $(CUDA_HOME)
lib_dirs = $(1)/lib64 $(1)/lib $(1)/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu
lib_file = $(firstword $(wildcard $(foreach d,$(2),$(d)/lib$(1).so)) $(wildcard $(foreach d,$(2),$(d)/lib$(1).so.[0-9]*)))
CUDNN_LIB := $(call lib_file,cudnn,$(call lib_dirs,$(CUDNN_HOME)))
NCCL_LIB  := $(call lib_file,nccl,$(call lib_dirs,$(NCCL_HOME)))
NCCL_H    := $(firstword $(wildcard $(NCCL_HOME)/include/nccl.h /usr/include/nccl.h))

# NCCL (needs CUDA) builds dist/'s GPU process group; auto: on when nccl.h and libnccl are found.
ifeq ($(NCCL),auto)
  WITH_NCCL := $(if $(and $(filter 1,$(WITH_CUDA)),$(NCCL_H),$(NCCL_LIB)),1,0)
else
  WITH_NCCL := $(NCCL)
endif
ifeq ($(WITH_NCCL),1)
  ifneq ($(WITH_CUDA),1)
    $(error NCCL=1 needs a CUDA build)
  endif
  ifeq ($(and $(NCCL_H),$(NCCL_LIB)),)
    $(error NCCL=1 but nccl.h or libnccl was not found under $(NCCL_HOME); set NCCL_HOME=)
  endif
endif

# MPI (Open MPI's mpicxx) turns on dist/: process groups, DistributedDataParallel, mdl-train --dist.
MPICXX := $(shell command -v mpicxx 2>/dev/null)
ifeq ($(MPI),auto)
  WITH_MPI := $(if $(MPICXX),1,0)
else
  WITH_MPI := $(MPI)
endif
ifeq ($(WITH_MPI),1)
  ifeq ($(MPICXX),)
    $(error MPI=1 but mpicxx was not found (make deps installs Open MPI))
  endif
endif

# One build folder per configuration, named by what changes the compiled code: build/cpu-mpi,
# build/cuda-mpi-nccl, build/cpu-mpi-asan-ubsan-werror, build/cuda-nccl-sm90-3f9a1c ... (a CUDA_HOME,
# CUDNN_HOME or NCCL_HOME other than the toolkit found adds a short hash of the three). $(BUILD)/flags
# holds the full compile and link flags; when they change anyway (CXXFLAGS=..., another MPI), the
# folder rebuilds. build/latest links to the last folder built.
MDL_CUDA_ARCH ?= 80 90
comma := ,
san_address := asan
san_undefined := ubsan
san_thread := tsan
san_leak := lsan
san_fuzzer-no-link := fuzz
CXX_NAME := $(notdir $(lastword $(CXX)))
BUILD_NAME := $(if $(filter 1,$(WITH_CUDA)),cuda,cpu) $(if $(filter 1,$(WITH_MPI)),mpi) $(if $(filter 1,$(WITH_NCCL)),nccl)
ifeq ($(WITH_CUDA),1)
  ifneq ($(strip $(MDL_CUDA_ARCH)),80 90)
    BUILD_NAME += sm$(subst $() ,-,$(strip $(MDL_CUDA_ARCH)))
  endif
  ifneq ($(CUDA_HOME_FOUND) $(CUDA_HOME) $(CUDA_HOME),$(CUDA_HOME) $(CUDNN_HOME) $(NCCL_HOME))
    BUILD_NAME += $(shell echo '$(CUDA_HOME) $(CUDNN_HOME) $(NCCL_HOME)' | md5sum | cut -c1-6)
  endif
endif
BUILD_NAME += $(foreach s,$(subst $(comma), ,$(SANITIZE)),$(or $(san_$(s)),$(s))) $(if $(DEBUG),debug)
BUILD_NAME += $(if $(filter 1,$(WERROR)),werror) $(if $(and $(filter 1,$(WITH_CUDA)),$(filter 1,$(CUDA_COMPILE_CHECK))),cudacheck)
BUILD_NAME += $(filter-out g++,$(CXX_NAME))
BUILD := build/$(subst $() ,-,$(strip $(BUILD_NAME)))

# Sanitizer builds (SANITIZE=address,undefined, thread, and fuzzing's fuzzer-no-link,...) compile at
# -O1, as the sanitizers' and libFuzzer's documentation advise: stack traces keep more frames, and
# the build takes well under half of -O3's time (the templated elementwise, copy and reduction
# kernels of cpu/ take most of it), for a test run somewhat slower.
OPT      := $(if $(DEBUG),-O0 -g,$(if $(filter fuzzer-no-link thread address,$(subst $(comma), ,$(SANITIZE))),-O1 -g1,-O3 -g1))
SANFLAGS := $(if $(SANITIZE),-fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=all,)
CPPFLAGS := -I. -MMD -MP $(if $(filter 1,$(WITH_CUDA)),-DMDL_WITH_CUDA,)
# -Wno-psabi: GCC notes that 32-byte vectors pass differently without AVX; mdl's 8-float vector
# code is always inlined into AVX2 functions and no vector crosses a call or the API.
CXXFLAGS := -std=c++20 $(OPT) -fopenmp -Wall -Wextra -Wno-psabi -pthread $(SANFLAGS)
LDLIBS   := -lz -pthread -fopenmp

# CUDA_COMPILE_CHECK=1 (CI, which has no GPU to run them): the .cu files compile unoptimised into
# their own folder (...-cudacheck): host code (-O0), device code to PTX (cicc, which nvcc's -O leaves
# at -O3) and PTX to SASS (ptxas), in about half the time. ptxas still checks the inline PTX.
NVCC_OPT := $(if $(filter 1,$(CUDA_COMPILE_CHECK)),-O0 -Xcicc -O0 -Xptxas -O0,-O3)
NVCCFLAGS := -std=c++20 $(NVCC_OPT) -I. -Xcompiler -fopenmp,-Wall,-Wextra -DMDL_WITH_CUDA --extended-lambda --expt-relaxed-constexpr \
  $(foreach a,$(MDL_CUDA_ARCH),-gencode arch=compute_$(a),code=sm_$(a)) \
  -gencode arch=compute_$(lastword $(MDL_CUDA_ARCH)),code=compute_$(lastword $(MDL_CUDA_ARCH))
# WERROR=1: g++'s warnings, nvcc's own and those of its host compiler fail the build.
ifeq ($(WERROR),1)
  CXXFLAGS  += -Werror
  NVCCFLAGS += -Xcompiler -Werror -Werror all-warnings
endif
ifeq ($(WITH_CUDA),1)
  LDLIBS += -L$(CUDA_LIBDIR) -Wl,-rpath,$(CUDA_LIBDIR) -lcublasLt -lcublas -lcudart
  ifeq ($(CUDNN_LIB),)
    LDLIBS += -lcudnn
  else
    LDLIBS += $(CUDNN_LIB) -Wl,-rpath,$(patsubst %/,%,$(dir $(CUDNN_LIB)))
  endif
  NVCCFLAGS += $(if $(filter-out $(CUDA_HOME),$(CUDNN_HOME)),-I$(CUDNN_HOME)/include,)
endif

ifeq ($(WITH_MPI),1)
  CPPFLAGS += -DMDL_WITH_MPI -DOMPI_SKIP_MPICXX -DMPICH_SKIP_MPICXX $(shell $(MPICXX) --showme:compile)
  LDLIBS   += $(shell $(MPICXX) --showme:link)
endif
ifeq ($(WITH_NCCL),1)
  CPPFLAGS += -DMDL_WITH_NCCL
  LDLIBS   += $(NCCL_LIB) -Wl,-rpath,$(patsubst %/,%,$(dir $(NCCL_LIB)))
endif
# dist/ (DDP, the process groups) is built with MPI, NCCL or both.
WITH_DIST := $(if $(filter 1,$(WITH_MPI) $(WITH_NCCL)),1,0)
ifeq ($(WITH_DIST),1)
  CPPFLAGS += -DMDL_WITH_DIST
endif
# dist/nccl_group.cpp includes CUDA headers, so only it gets the toolkit's include paths.
$(BUILD)/dist/nccl_group.o: CPPFLAGS += -I$(CUDA_HOME)/include $(if $(filter-out $(CUDA_HOME),$(CUDNN_HOME)),-I$(CUDNN_HOME)/include,) \
  $(if $(filter-out $(CUDA_HOME),$(NCCL_HOME)),-I$(NCCL_HOME)/include,)

LIB_DIRS := switches/list tensor io profiler kernels cpu cuda ops ops/native autograd nn nn/models optim amp data switches train $(if $(filter 1,$(WITH_DIST)),dist,)
LIB_SRCS := $(filter-out $(if $(filter 1,$(WITH_MPI)),,dist/mpi_group.cpp) $(if $(filter 1,$(WITH_NCCL)),,dist/nccl_group.cpp),\
  $(foreach d,$(LIB_DIRS),$(wildcard $(d)/*.cpp)))
CU_SRCS  := $(if $(filter 1,$(WITH_CUDA)),$(wildcard cuda/*.cu),)
# The CUDA runtime's host side (context, allocators, streams, events, graphs: no kernels) is plain C++
# against the toolkit's headers, compiled by g++ in a fraction of nvcc's time.
CUDA_HOST_SRCS := $(if $(filter 1,$(WITH_CUDA)),$(wildcard cuda/runtime/*.cpp),)
$(CUDA_HOST_SRCS:%.cpp=$(BUILD)/%.o): CPPFLAGS += -I$(CUDA_HOME)/include $(if $(filter-out $(CUDA_HOME),$(CUDNN_HOME)),-I$(CUDNN_HOME)/include,)
LIB_OBJS := $(LIB_SRCS:%.cpp=$(BUILD)/%.o) $(CUDA_HOST_SRCS:%.cpp=$(BUILD)/%.o) $(CU_SRCS:%.cu=$(BUILD)/%.cu.o)
# make -j starts the longest compiles first (nvcc's, then cpu/'s kernels), so that its last jobs are
# short ones; the archive keeps LIB_OBJS's order.
LIB_BUILD_ORDER := $(filter %.cu.o,$(LIB_OBJS)) $(filter $(BUILD)/cpu/%,$(LIB_OBJS)) \
  $(filter-out %.cu.o $(BUILD)/cpu/%,$(LIB_OBJS))
LIB      := $(BUILD)/libmdl.a
# mdl-train's own parts (its options, the setup from them, plots, --evaluate, --dump-order and
# run_training), apart from the library: linked into the tools, the tests and the fuzz harnesses,
# never installed. A program built on train::Trainer needs only libmdl.a.
APP_SRCS := $(wildcard tools/mdl_train/*.cpp)
APP_LIB  := $(BUILD)/libmdl_train_app.a

# The suites, tests/<folder>/test_*.cpp: one folder per library folder they test (tests/nn/ for nn/,
# tests/cpu/ for cpu/, tests/tools/ for mdl-train's parts, ...); tests/support/ holds the headers they share.
TEST_SRCS := tests/main.cpp $(sort $(shell find tests -name 'test_*.cpp'))
# Under ThreadSanitizer only the suites of mdl's own threads are built (see run-tests below).
ifneq ($(filter thread,$(subst $(comma), ,$(SANITIZE))),)
TSAN_SUITES := data/test_cache_reliability data/test_cache_skip data/test_datasets data/test_loader data/test_pinned \
  data/test_sampler data/test_transforms profiler/test_profiler profiler/test_device profiler/test_output dist/test_dist dist/test_nccl \
  ops/test_amp_weight_cache_threads
TEST_SRCS := tests/main.cpp $(TSAN_SUITES:%=tests/%.cpp)
endif
# doctest's assertions compile without a try/catch each (an exception inside one still fails its
# test case, which then ends there): the test files build about 15% faster.
TEST_CPPFLAGS := -DDOCTEST_CONFIG_SUPER_FAST_ASSERTS
# Under AddressSanitizer the suites themselves compile uninstrumented: the sanitizers watch the
# library they drive (malloc and free are the sanitizer's in every object, so leaks and double frees
# anywhere still fail), the suites build in half the time and their reference loops run at full
# speed. The library is linked whole, ahead of the suites, so that an inline function both compile
# is kept in the library's instrumented copy; the suites ask the library whether it is instrumented
# (tensor/sanitizers.h; tests/support/test_util.h: kSanitized).
ASAN_LIBRARY := $(filter address,$(subst $(comma), ,$(SANITIZE)))
TEST_LINK_FIRST := $(if $(ASAN_LIBRARY),-Wl$(comma)--whole-archive $(LIB) -Wl$(comma)--no-whole-archive)
# The suites compile at -O1 in an -O3 build too: they time no kernel of their own (the library stays
# at -O3), their reference loops run fast enough at -O1, and each file compiles in three quarters
# of -O3's time. (-O0 would save as much again but makes the reference loops of the GEMM and conv
# suites four times slower under AddressSanitizer.)
TEST_OPT := $(if $(DEBUG),$(OPT),-O1 -g1)
# The suites do not read the build's CUDA or NCCL defines, so with the same compiler, optimisation,
# MPI and instrumentation they compile to the same objects in every build: they live in their own
# folder, build/suites-<hash of their flags>, shared by the builds that agree (CI's AddressSanitizer
# build and its CUDA build compile them once). The suites that do read those defines compile in
# each build's own folder (SUITES_BY_BUILD).
SUITES_BY_BUILD := tests/kernels/test_kernel_registry.cpp tests/dist/test_nccl.cpp tests/cuda/test_cudnn_sdpa.cpp \
  tests/cuda/test_block_counters.cpp
SUITE_CPPFLAGS := $(filter-out -DMDL_WITH_CUDA -DMDL_WITH_NCCL,$(CPPFLAGS)) $(TEST_CPPFLAGS)
SUITE_CXXFLAGS := -std=c++20 $(TEST_OPT) -fopenmp -Wall -Wextra -Wno-psabi -pthread -fno-omit-frame-pointer \
  $(if $(ASAN_LIBRARY),,$(SANFLAGS)) $(if $(filter 1,$(WERROR)),-Werror)
SUITE_FLAGS_TEXT := $(strip $(CXX) $(shell $(CXX) -dumpfullversion 2>/dev/null) | $(SUITE_CPPFLAGS) | $(SUITE_CXXFLAGS))
SUITE_BUILD := build/suites-$(shell printf '%s' '$(SUITE_FLAGS_TEXT)' | md5sum | cut -c1-8)
SHARED_TEST_SRCS := $(filter-out $(SUITES_BY_BUILD),$(TEST_SRCS))
SHARED_TEST_OBJS := $(SHARED_TEST_SRCS:%.cpp=$(SUITE_BUILD)/%.o)
OWN_TEST_OBJS := $(patsubst %.cpp,$(BUILD)/%.o,$(filter $(SUITES_BY_BUILD),$(TEST_SRCS)))
TEST_OBJS := $(SHARED_TEST_OBJS) $(OWN_TEST_OBJS)
$(OWN_TEST_OBJS): private CPPFLAGS += $(TEST_CPPFLAGS)
$(OWN_TEST_OBJS): private CXXFLAGS := $(SUITE_CXXFLAGS)
# g++ parses the headers every suite includes (tests/support/suite_headers.h) once per suite folder,
# into a precompiled header that each suite loads ahead of its own includes (-include; -Winvalid-pch
# makes a header built with other flags an error under WERROR rather than a silent slow build).
# tests/main.cpp configures doctest before including it, so it takes no precompiled header; the
# suites of SUITES_BY_BUILD parse the header's text.
SUITE_PCH_FLAGS := $(if $(filter g++,$(CXX_NAME)),-include $(SUITE_BUILD)/pch/suite_headers.h -Winvalid-pch)
TEST_PCH := $(if $(filter g++,$(CXX_NAME)),$(SUITE_BUILD)/pch/suite_headers.h.gch)
$(OWN_TEST_OBJS): private CPPFLAGS += -include tests/support/suite_headers.h
# A suite that reads the CUDA context's device state through the toolkit's API.
CUDA_API_TEST_OBJS := $(if $(filter 1,$(WITH_CUDA)),$(BUILD)/tests/cuda/test_block_counters.o,)
$(CUDA_API_TEST_OBJS): private CPPFLAGS += -I$(CUDA_HOME)/include
# The optimizer steps' sqrt vectorises only when it need not set errno (its argument is a sum of
# squares, never negative).
OPTIM_CXXFLAGS := -fno-math-errno
$(BUILD)/cpu/optim.o: CXXFLAGS += $(OPTIM_CXXFLAGS)
TEST_BIN  := $(BUILD)/mdl_tests
# The program tests/dist/test_dist.cpp runs under mpirun, one scenario per launch.
DIST_WORKER := $(if $(filter 1,$(WITH_MPI)),$(BUILD)/mdl_dist_worker,)

# Benchmarks: one binary per bench/bench_*.cpp; OpenBLAS joins as a yardstick when installed.
BENCH_SRCS := $(filter-out bench/bench_dist.cpp,$(wildcard bench/bench_*.cpp))
BENCH_BINS := $(BENCH_SRCS:bench/%.cpp=$(BUILD)/bench/%)
OPENBLAS := $(wildcard /usr/include/x86_64-linux-gnu/cblas.h /usr/include/cblas.h /usr/include/openblas/cblas.h)
BENCH_FLAGS := $(if $(OPENBLAS),-DMDL_HAVE_OPENBLAS,)
BENCH_LIBS  := -lbenchmark $(if $(OPENBLAS),-lopenblas,)
# cuDNN's fused attention, the yardstick bench_cuda times beside mdl's attention kernels
# (bench/cudnn_sdpa.h): host code against the toolkit's and cuDNN's headers, compiled by g++ in CUDA
# builds only and linked into bench_cuda and the tests there, never into the library.
YARDSTICK_OBJS := $(if $(filter 1,$(WITH_CUDA)),$(BUILD)/bench/cudnn_sdpa.o,)
$(YARDSTICK_OBJS): CPPFLAGS += -I$(CUDA_HOME)/include $(if $(filter-out $(CUDA_HOME),$(CUDNN_HOME)),-I$(CUDNN_HOME)/include,)

TOOL_SRCS := $(wildcard tools/*.cpp)
TOOL_BINS := $(TOOL_SRCS:tools/%.cpp=$(BUILD)/%)

# Programs written as a user of the library would write them (the Trainer, a hand-written loop).
EXAMPLE_SRCS := $(wildcard examples/*.cpp)
EXAMPLE_BINS := $(EXAMPLE_SRCS:examples/%.cpp=$(BUILD)/examples/%)

DEB_PACKAGES := g++ make pkg-config python3 doctest-dev libstb-dev libbenchmark-dev zlib1g-dev dataset-fashion-mnist libopenblas-dev \
  libopenmpi-dev openmpi-bin

.PHONY: all lib tests benches tools examples run-examples run-study-check check-install test bench bench-dist study run-tests run-benches \
  run-bench-dist run-study bench-record bench-check docs roofline roofline-check deps install clean gpu-check gpu-bundle fuzz fuzzers \
  run-fuzz fuzz-replay print-build latest format format-check \
  compile_commands.json
all: lib tests benches tools examples
lib: $(LIB)
tests: $(TEST_BIN) $(DIST_WORKER)
benches: $(BENCH_BINS)
tools: $(TOOL_BINS)
examples: $(EXAMPLE_BINS)

# Every object and program depends on $(BUILD)/flags, rewritten only when the flags differ from it.
FLAGS := $(BUILD)/flags
FLAGS_TEXT := $(CXX) $(CPPFLAGS) $(CXXFLAGS) $(TEST_CPPFLAGS) $(SUITE_CXXFLAGS) $(OPTIM_CXXFLAGS) $(if $(filter 1,$(WITH_CUDA)),| $(NVCC) $(NVCCFLAGS) )| $(BENCH_FLAGS) | $(LDLIBS) $(BENCH_LIBS)
ifneq ($(file <$(FLAGS)),$(FLAGS_TEXT))
  $(FLAGS): FORCE
endif
$(FLAGS): | latest
	@mkdir -p $(dir $@)
	@echo '$(FLAGS_TEXT)' > $@
latest:
	@$(if $(filter build/%,$(BUILD)),mkdir -p build && ln -sfn $(patsubst build/%,%,$(BUILD)) build/latest,:)
FORCE:

$(BUILD)/%.o: %.cpp $(FLAGS)
	@mkdir -p $(dir $@)
	$(CXX) $(CPPFLAGS) $(CXXFLAGS) -c $< -o $@

# The shared suites, their precompiled header (compiled from a copy in $(SUITE_BUILD)/pch, where the
# suites' -include finds it with the .gch beside it) and the flags that name their folder.
$(SUITE_BUILD)/flags:
	@mkdir -p $(dir $@)
	@echo '$(SUITE_FLAGS_TEXT)' > $@
$(SUITE_BUILD)/pch/suite_headers.h.gch: tests/support/suite_headers.h | $(SUITE_BUILD)/flags
	@mkdir -p $(dir $@)
	cp $< $(SUITE_BUILD)/pch/suite_headers.h
	$(CXX) $(SUITE_CPPFLAGS) $(SUITE_CXXFLAGS) -x c++-header $(SUITE_BUILD)/pch/suite_headers.h -o $@
$(SUITE_BUILD)/tests/main.o: tests/main.cpp | $(SUITE_BUILD)/flags
	@mkdir -p $(dir $@)
	$(CXX) $(SUITE_CPPFLAGS) $(SUITE_CXXFLAGS) -c $< -o $@
$(SUITE_BUILD)/%.o: %.cpp $(TEST_PCH) | $(SUITE_BUILD)/flags
	@mkdir -p $(dir $@)
	$(CXX) $(SUITE_CPPFLAGS) $(SUITE_PCH_FLAGS) $(SUITE_CXXFLAGS) -c $< -o $@

$(BUILD)/%.cu.o: %.cu $(FLAGS)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -MMD -MP -c $< -o $@

$(LIB): $(LIB_BUILD_ORDER)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $(LIB_OBJS)

$(APP_LIB): $(APP_SRCS:%.cpp=$(BUILD)/%.o)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(TEST_BIN): $(TEST_OBJS) $(YARDSTICK_OBJS) $(APP_LIB) $(LIB) $(FLAGS)
	$(CXX) $(CXXFLAGS) -o $@ $(TEST_LINK_FIRST) $(TEST_OBJS) $(YARDSTICK_OBJS) $(APP_LIB) $(LIB) $(LDLIBS)

$(BUILD)/mdl_dist_worker: tests/dist/worker.cpp $(APP_LIB) $(LIB) $(FLAGS)
	$(CXX) $(CPPFLAGS) $(CXXFLAGS) -o $@ $< $(APP_LIB) $(LIB) $(LDLIBS)

$(BUILD)/bench/bench_cuda: $(YARDSTICK_OBJS)
$(BUILD)/bench/%: bench/%.cpp $(LIB) $(FLAGS)
	@mkdir -p $(dir $@)
	$(CXX) $(CPPFLAGS) $(BENCH_FLAGS) $(CXXFLAGS) -o $@ $< $(filter %.o,$^) $(LIB) $(BENCH_LIBS) $(LDLIBS)

$(BUILD)/%: tools/%.cpp $(APP_LIB) $(LIB) $(FLAGS)
	$(CXX) $(CPPFLAGS) $(CXXFLAGS) -o $@ $< $(APP_LIB) $(LIB) $(LDLIBS)

$(BUILD)/examples/%: examples/%.cpp $(LIB) $(FLAGS)
	@mkdir -p $(dir $@)
	$(CXX) $(CPPFLAGS) $(CXXFLAGS) -o $@ $< $(LIB) $(LDLIBS)

# Fuzzing with clang's libFuzzer: one harness per reader (fuzz/fuzz_*.cpp), built under AddressSanitizer
# and UBSan against a library instrumented for coverage, in its own folder (build/cpu-fuzz-asan-ubsan-clang++-14).
# make fuzz runs each for FUZZ_SECONDS on a fresh copy of its seed corpus (fuzz/make_seeds.py) with its
# dictionary (fuzz/dict/), then prints one table and fails when any harness crashed, hung, leaked or ran out
# of memory; the inputs that did are kept in $(BUILD)/fuzz-run/<harness>/artifacts until the next run.
# It installs clang 14, its sanitizer runtimes and libomp when missing. FUZZ_CXX="ccache clang++-14" caches
# the build; FUZZ_MPI=auto builds the library with MPI; FUZZ_ARGS adds libFuzzer flags (e.g. -jobs=2).
FUZZ_CXX      ?= clang++-14
FUZZ_MPI      ?= 0
FUZZ_SECONDS  ?= 10
FUZZ_TIMEOUT  ?= 10
FUZZ_RSS_MB   ?= 2048
FUZZ_SANITIZE := fuzzer-no-link,address,undefined
FUZZ_NAMES := $(patsubst fuzz/fuzz_%.cpp,%,$(wildcard fuzz/fuzz_*.cpp))
FUZZ_BINS  := $(FUZZ_NAMES:%=$(BUILD)/fuzz/fuzz_%)
FUZZ_RUN   := $(BUILD)/fuzz-run
# Each harness's dictionary (fuzz/dict/<format>.dict) and largest input in bytes.
FUZZ_DICT_json := json
FUZZ_DICT_safetensors := safetensors
FUZZ_DICT_checkpoint := safetensors
FUZZ_DICT_idx := idx
FUZZ_DICT_cifar := cifar
FUZZ_DICT_cache_record := cache
FUZZ_DICT_cache_file := cache
FUZZ_DICT_image := image
FUZZ_DICT_text := text
FUZZ_DICT_options := options
FUZZ_DICT_csv := csv
FUZZ_MAX_LEN_cifar := 12800
FUZZ_MAX_LEN_image := 16384
FUZZ_MAX_LEN_options := 512
FUZZ_MAX_LEN_cache_record := 1024
fuzz_max_len = $(or $(FUZZ_MAX_LEN_$(1)),4096)

FUZZ_PACKAGES := clang-14 libclang-rt-14-dev libomp-14-dev
fuzz:
	@$(call install_missing,$(FUZZ_PACKAGES))
	$(MAKE) run-fuzz CXX="$(FUZZ_CXX)" SANITIZE=$(FUZZ_SANITIZE) CUDA=0 NCCL=0 MPI=$(FUZZ_MPI)
fuzzers: $(FUZZ_BINS)

$(BUILD)/fuzz/fuzz_%: fuzz/fuzz_%.cpp $(APP_LIB) $(LIB) $(FLAGS)
	@mkdir -p $(dir $@)
	$(CXX) $(CPPFLAGS) $(CXXFLAGS) -fsanitize=fuzzer -o $@ $< $(APP_LIB) $(LIB) $(LDLIBS)

fuzz_run_one = d=$(FUZZ_RUN)/$(1); mkdir -p $$d/artifacts; echo "== fuzz_$(1): $(FUZZ_SECONDS) s"; t0=$$(date +%s); \
  $(BUILD)/fuzz/fuzz_$(1) $$d/corpus -max_total_time=$(FUZZ_SECONDS) -timeout=$(FUZZ_TIMEOUT) \
    -rss_limit_mb=$(FUZZ_RSS_MB) -max_len=$(call fuzz_max_len,$(1)) -dict=fuzz/dict/$(FUZZ_DICT_$(1)).dict \
    -artifact_prefix=$$d/artifacts/ -print_final_stats=1 $(FUZZ_ARGS) > $$d/log 2>&1; echo $$? > $$d/rc; echo $$(($$(date +%s) - t0)) > $$d/seconds
run-fuzz: fuzzers
	@$(if $(filter fuzzer-no-link,$(subst $(comma), ,$(SANITIZE))),,$(error run-fuzz needs SANITIZE=$(FUZZ_SANITIZE) and clang; use make fuzz))
	@rm -rf $(FUZZ_RUN) && python3 fuzz/make_seeds.py $(FUZZ_RUN)
	@$(foreach h,$(FUZZ_NAMES),$(call fuzz_run_one,$(h));)
	@python3 tools/fuzz_table.py $(FUZZ_RUN) $(FUZZ_NAMES)

# make fuzz-replay SANITIZE=address,undefined  runs each harness once on its seed corpus (what CI
# checks) without clang or libFuzzer: the harness is linked with fuzz/replay_main.cpp against this
# configuration's library, so the ASan/UBSan test build's folder needs no second library build. Each
# input is cut to the harness's -max_len, as in make fuzz. Any sanitizer report, failed check or
# harness that runs past FUZZ_REPLAY_TIMEOUT seconds fails it.
FUZZ_REPLAY_BINS    := $(FUZZ_NAMES:%=$(BUILD)/fuzz-replay/fuzz_%)
FUZZ_REPLAY_RUN     := $(BUILD)/fuzz-replay-run
FUZZ_REPLAY_TIMEOUT ?= 300
fuzz-replay: $(FUZZ_REPLAY_BINS)
	@rm -rf $(FUZZ_REPLAY_RUN) && python3 fuzz/make_seeds.py $(FUZZ_REPLAY_RUN)
	@$(foreach h,$(FUZZ_NAMES),test -d $(FUZZ_REPLAY_RUN)/$(h)/corpus || { echo "fuzz-replay: no seeds for fuzz_$(h)"; exit 1; }; \
	  timeout $(FUZZ_REPLAY_TIMEOUT) $(BUILD)/fuzz-replay/fuzz_$(h) -max_len=$(call fuzz_max_len,$(h)) $(FUZZ_REPLAY_RUN)/$(h)/corpus \
	  || { echo "fuzz-replay: fuzz_$(h) failed (exit $$?)"; exit 1; };)
	@echo "fuzz-replay: $(words $(FUZZ_NAMES)) harnesses ran their seed corpora"

# Kept between runs (make would delete them as intermediate files).
.SECONDARY: $(FUZZ_NAMES:%=$(BUILD)/fuzz/fuzz_%.o) $(BUILD)/fuzz/replay_main.o
$(BUILD)/fuzz-replay/fuzz_%: $(BUILD)/fuzz/fuzz_%.o $(BUILD)/fuzz/replay_main.o $(APP_LIB) $(LIB) $(FLAGS)
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS) -o $@ $< $(BUILD)/fuzz/replay_main.o $(APP_LIB) $(LIB) $(LDLIBS)

print-build:
	@echo $(BUILD)

# make deps installs what is missing (with sudo only when not root) and records the package list in
# build/deps.stamp; test, bench, bench-dist and study run it only when that record differs from
# DEB_PACKAGES, then build and run in a new make, which sees what was installed (mpicxx: MPI=auto).
install_missing = missing=""; for p in $(1); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "make: installing$$missing"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi
DEPS_STAMP := build/deps.stamp
deps:
	@$(call install_missing,$(DEB_PACKAGES))
	@mkdir -p $(dir $(DEPS_STAMP)) && echo '$(DEB_PACKAGES)' > $(DEPS_STAMP)

$(DEPS_STAMP): $(if $(filter-out $(file <$(DEPS_STAMP)),$(DEB_PACKAGES))$(filter-out $(DEB_PACKAGES),$(file <$(DEPS_STAMP))),deps,)

# The examples and the tiny study run in the plain build only (the sanitizer runs cover the same
# library code), and before the suite, so doctest's totals stay the last line. So does bench-check:
# every benchmark the switch list names must exist in the suites (bench/check_cases.py);
# docs/OPTIMIZATIONS.md must be what the switch list and the recorded figures give; and a GPU
# lease's record, goals included, must come out of a made-up run (tests/run_gpu_summary.sh).
test: $(DEPS_STAMP)
	python3 tools/check_layers.py
	python3 tools/optimizations_guide.py --check
	$(if $(SANITIZE),,$(MAKE) --no-print-directory bench-check)
	$(if $(SANITIZE),,$(MAKE) --no-print-directory run-examples)
	$(if $(SANITIZE),,$(MAKE) --no-print-directory run-study-check)
	$(if $(SANITIZE),,tests/run_gpu_summary.sh)
	$(MAKE) --no-print-directory run-tests
run-tests: tests
	$(TEST_BIN) $(TEST_ARGS)
# Each example at a tiny size (seconds): its exit status and the lines it must print.
run-examples: examples
	tests/run_examples.sh $(BUILD)/examples
# The GPU study's plan (tools/gpu_study.sh) on the CPU at a tiny size (the MLP on 256 images, one
# epoch, two seeds: about 15-30 s on 2 cores): its report's tables, charts and summary, and the table
# of AMP's price in accuracy checked cell by cell.
run-study-check: $(BUILD)/mdl-study
	tests/run_study.sh $(BUILD)/mdl-study

# SANITIZE=thread builds and runs the tests of mdl's own threads: the loader, the caches, the
# profiler and data parallel. OpenMP's runtime is not instrumented (TSan would report its barriers
# as races), so its teams are held to one thread; any report fails the run.
ifneq ($(filter thread,$(subst $(comma), ,$(SANITIZE))),)
TEST_ARGS ?= --test-case='data:*,file cache:*,memory cache:*,DataLoader*,DistributedSampler*,profiler:*,dist:*,mdl-train --dist*'
run-tests: export OMP_NUM_THREADS := 1
run-tests: export TSAN_OPTIONS := halt_on_error=1 second_deadlock_stack=1 $(TSAN_OPTIONS)
endif

# Each suite writes its JSON beside the binaries; bench/summary.py closes with one row per optimization.
bench: $(DEPS_STAMP)
	$(MAKE) run-benches
# BENCH_REPS=N runs each benchmark N times (3 by default: about 8.5 minutes on 2 cores): the
# summary gives each row's median gain, its min-max range and whether that range reaches 1.0x
# (within noise). BENCH_REPS=1 runs each once (about 3 minutes), with no spread. The repetitions
# of a suite's benchmarks run in random order (Google Benchmark's random interleaving), so a
# machine that drifts over the minutes does not favour the side of a pair that ran first.
BENCH_REPS ?= 3
# The roofline ceilings are measured first (once; $(BUILD)/roofline.json is reused), so that the summary's
# "% of limit" column holds each optimized side against this machine's FMA peak or memory bandwidth.
run-benches: benches $(BUILD)/mdl-roofline
	@python3 bench/check_cases.py $(BUILD)/bench
	@$(BUILD)/mdl-roofline
	@mkdir -p $(BUILD)/bench/results
	@for b in $(BENCH_BINS); do echo "== $$b"; \
	  $$b --benchmark_out=$(BUILD)/bench/results/$$(basename $$b).json --benchmark_out_format=json \
	    $(if $(filter-out 1,$(BENCH_REPS)),--benchmark_repetitions=$(BENCH_REPS) --benchmark_enable_random_interleaving=true) \
	    $(BENCH_ARGS) || exit 1; done
	@python3 bench/summary.py $(BUILD)/bench/results

# Keeps the last make bench's figures as this machine kind's current ones: bench/results/<kind>.json,
# and bench/RESULTS.md written anew from every kind's (bench/results.py).
bench-record:
	python3 bench/results.py record $(BUILD)/bench/results
	python3 tools/optimizations_guide.py

# Each benchmark the switch list (switches/list/switches.def) and bench/summary.py name exists.
bench-check: benches
	python3 bench/check_cases.py $(BUILD)/bench

# docs/OPTIMIZATIONS.md, the learner's guide, from the switch list and bench/results/.
docs:
	python3 tools/optimizations_guide.py

# Data parallel: one run under mpirun -np 2 (SimpleCNN alone on rank 0 and on both ranks, and
# all_reduce from 1 MB to 256 MB); about a minute. MPI_RUN_FLAGS adds mpirun options (in a container
# that blocks CMA: MPI_RUN_FLAGS="--mca btl_vader_single_copy_mechanism none").
bench-dist: $(DEPS_STAMP)
	$(MAKE) run-bench-dist
run-bench-dist: $(BUILD)/bench/bench_dist
	@mkdir -p $(BUILD)/bench/results
	mpirun -np 2 --oversubscribe --bind-to none $$( [ "$$(id -u)" = 0 ] && echo --allow-run-as-root ) $(MPI_RUN_FLAGS) \
	  $(BUILD)/bench/bench_dist --benchmark_out=$(BUILD)/bench/results/bench_dist.json --benchmark_out_format=json $(BENCH_ARGS)

# The optimization study on Fashion-MNIST, in memory and decoded from PNG files: reports/study.md
# (time tables, and AMP's error against f32), reports/study/summary.csv (which make gpu-bundle carries
# for the GPU half to set beside its own), CSV logs and PNG plots. STUDY_DATA, STUDY_EPOCHS,
# STUDY_SUBSET, STUDY_MODELS, STUDY_DECODED_MODELS, STUDY_ROWS, STUDY_SEEDS, STUDY_TARGET,
# STUDY_DEVICES, STUDY_OUT and the rest tools/mdl-study.cpp lists scale and steer it.
study: $(DEPS_STAMP)
	$(MAKE) run-study
run-study: $(BUILD)/mdl-study
	STUDY_COMMIT=$${STUDY_COMMIT:-$$(git describe --always --dirty 2>/dev/null || echo unknown)} $(BUILD)/mdl-study

# The machine's roofline ceilings, measured once (under 30 s) into $(BUILD)/roofline.json, where
# mdl-train --profile reads them; later runs print them again. ROOFLINE_ARGS=--refresh measures anew.
roofline: $(BUILD)/mdl-roofline
	$(BUILD)/mdl-roofline $(ROOFLINE_ARGS)
roofline-check: $(BUILD)/mdl-roofline
	tools/roofline_check.sh $(BUILD)

install: lib
	install -d $(PREFIX)/lib/pkgconfig $(PREFIX)/include/mdl
	install -m 644 $(LIB) $(PREFIX)/lib/libmdl.a
	install -m 644 mdl.h $(PREFIX)/include/mdl/mdl.h
	for h in $(foreach d,$(LIB_DIRS),$(wildcard $(d)/*.h $(d)/*.def)); do \
	  install -d $(PREFIX)/include/mdl/$$(dirname $$h) && install -m 644 $$h $(PREFIX)/include/mdl/$$h; done
	printf 'prefix=%s\nlibdir=$${prefix}/lib\nincludedir=$${prefix}/include/mdl\n\nName: mdl\nDescription: a minimal deep learning framework\nVersion: 0.1.0\nCflags: -std=c++20 -fopenmp -I$${includedir}%s\nLibs: -L$${libdir} -lmdl %s\n' \
	  "$(abspath $(PREFIX))" "$(foreach f,$(filter -DMDL_WITH_%,$(CPPFLAGS)), $(f))" "$(LDLIBS)" > $(PREFIX)/lib/pkgconfig/mdl.pc

check-install: lib
	MAKE="$(MAKE)" tests/check_install.sh CUDA=$(WITH_CUDA) MPI=$(WITH_MPI) NCCL=$(WITH_NCCL) WERROR=$(WERROR) CXX="$(CXX)"

# One run on a GPU machine: build with CUDA, run the CUDA tests and benchmarks, print one table.
gpu-check:
	MAKE="$(MAKE)" tools/gpu_check.sh

# The same run's binaries built here for a GPU machine with no compiler toolchain of ours:
# build/gpu-bundle/mdl-gpu.tar.xz; there, `tar xf mdl-gpu.tar.xz && mdl-gpu/gpu_check.sh`.
gpu-bundle:
	MAKE="$(MAKE)" tools/gpu_bundle.sh

# .clang-format is written for clang-format 14; another version formats some lines differently.
FORMAT_FILES = $(shell git ls-files '*.cpp' '*.h' '*.cu' '*.cuh')
CLANG_FORMAT = $(or $(shell command -v clang-format-14),$(shell clang-format --version 2>/dev/null | grep -q 'version 14\.' && echo clang-format))
need_clang_format = $(if $(CLANG_FORMAT),,$(call install_missing,clang-format-14))
format:
	@$(need_clang_format)
	$(or $(CLANG_FORMAT),clang-format-14) -i $(FORMAT_FILES)

format-check:
	@$(need_clang_format)
	@mkdir -p build
	@$(or $(CLANG_FORMAT),clang-format-14) --dry-run -Werror $(FORMAT_FILES) 2>$(FORMAT_LOG) || { \
	  files=$$(grep -o '^[^:]*:[0-9]*:[0-9]*: error' $(FORMAT_LOG) | cut -d: -f1 | sort -u); \
	  echo "$$files" | head -n 20 | sed 's/^/  /'; \
	  echo "make format-check: $$(echo "$$files" | wc -l) files (the first 20 above) are not formatted as .clang-format asks" \
	    "(clang-format 14; the details: $(FORMAT_LOG)). Run \`make format\` to format them."; \
	  exit 1; }
FORMAT_LOG = build/format-check.log

# The compile command of every source this configuration builds, as the rules above run them
# (make -n -B prints them without compiling), for clangd and other tools.
compile_commands.json:
	@$(MAKE) --no-print-directory -n -B lib tests benches tools | awk -v dir='$(CURDIR)' ' \
	  BEGIN { printf "[" } \
	  index($$0, "$(CXX) ") == 1 || index($$0, "$(NVCC) ") == 1 { \
	    file = ""; for (i = 2; i <= NF; i++) if ($$i ~ /\.(cpp|cu)$$/) file = $$i; \
	    if (file == "") next; \
	    gsub(/\\/, "\\\\"); gsub(/"/, "\\\""); \
	    printf "%s\n  {\"directory\": \"%s\", \"file\": \"%s\", \"command\": \"%s\"}", sep, dir, file, $$0; sep = "," } \
	  END { print "\n]" }' > $@.tmp && mv $@.tmp $@
	@echo "compile_commands.json: $$(grep -c '"file"' $@) commands for $(BUILD)"

clean:
	rm -rf build

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
-include $(shell find $(SUITE_BUILD) -name '*.d' 2>/dev/null)
