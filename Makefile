# libsdp — top-level entry points.  `make demo` and `make test` do all set-up:
# they install missing Debian packages (as root, via apt-get), build, and run.
BUILD      ?= build
BUILD_ASAN ?= build-asan
BUILD_TSAN ?= build-tsan
GENERATOR  := $(shell command -v ninja >/dev/null 2>&1 && echo Ninja || echo "Unix Makefiles")

.PHONY: all deps deps-deb build build-asan build-tsan test test-quick test-tsan test-vm demo bench bench-vm clean fuzz install deb

all: build

deps:
	@scripts/install-deps.sh

# What `make deb` and the packaging test (tests/packaging/install.sh) need.
DEB_PKGS := build-essential debhelper dpkg-dev lintian
deps-deb: deps
	@SDP_EXTRA_PKGS="$(DEB_PKGS)" scripts/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD) -G "$(GENERATOR)" >/dev/null
	@cmake --build $(BUILD) -j2

build-asan: deps
	@cmake -S . -B $(BUILD_ASAN) -G "$(GENERATOR)" -DSDP_SANITIZE=asan >/dev/null
	@cmake --build $(BUILD_ASAN) -j2

build-tsan: deps
	@cmake -S . -B $(BUILD_TSAN) -G "$(GENERATOR)" -DSDP_SANITIZE=tsan >/dev/null
	@cmake --build $(BUILD_TSAN) -j2

# Every test: unit, fuzz-corpus replay, integration over shm and real
# programs, the whole suite again under ASan+UBSan, the threaded core under
# ThreadSanitizer, then the verbs transport on soft-RoCE in a VM.
test: build build-asan build-tsan deps-deb
	@tests/run.sh $(BUILD)
	@SDP_TEST_SANITIZER=asan tests/run.sh $(BUILD_ASAN)
	@$(MAKE) --no-print-directory test-tsan
	@$(MAKE) --no-print-directory test-vm

# ThreadSanitizer: the unit tests and the integration tests that run
# threads against one connection (streams both ways, half-close, ZCopy with
# signals, fallback).  Left out: every test that forks a threaded process
# (fork, exec, kill, abort, semantics, sdpstat): TSan cannot start threads
# in such a child ("starting new threads after multi-threaded fork is not
# supported"), so the child's progress thread never runs; and the real
# programs, which are not built with TSan.
TSAN_TESTS := ^unit/|^itest/(stream|halfclose|many|zcopy|fallback)|^switch/stream|^(itest|switch)/semantics$$
test-tsan: build-tsan
	@SDP_TEST_SANITIZER=tsan SDP_TEST_FILTER='$(TSAN_TESTS)' tests/run.sh $(BUILD_TSAN)

# The verbs transport on real soft-RoCE: one qemu VM boot (scripts/vm-run),
# two rxe devices on a veth pair, tests/vm/suite.sh inside.  Fails loudly when
# qemu cannot run.
VM_PKGS := qemu-system-x86 linux-image-amd64 busybox-static ibverbs-utils \
	   rdma-core perftest qperf iperf3 kmod cpio openssh-server openssh-client \
	   tshark
test-vm: build
	@SDP_EXTRA_PKGS="$(VM_PKGS)" scripts/install-deps.sh
	@start=$$(date +%s); scripts/vm-run -t 900 -- bash tests/vm/suite.sh $(BUILD); rc=$$?; \
	 echo "test-vm: exit $$rc after $$(( $$(date +%s) - start )) s"; \
	 if [ $$rc = 125 ]; then echo "test-vm: FAILED: THE VM DID NOT RUN (qemu/kernel/initrd): see above" >&2; fi; \
	 exit $$rc

# Fast subset for development (no sanitizer pass).
test-quick: build deps-deb
	@tests/run.sh $(BUILD)

# Install into $(DESTDIR)$(PREFIX): libsdp.so.1 and its links, sdp/sdp.h,
# sdp.pc, sdp_run, sdpstat, sdpperf, the manual pages, and /etc/libsdp.conf
# (where the library reads it; an existing one is kept, the sample then goes
# next to it as libsdp.conf.sample).
PREFIX  ?= /usr/local
DESTDIR ?=
install: build
	@cmake -S . -B $(BUILD) -DCMAKE_INSTALL_PREFIX="$(PREFIX)" >/dev/null
	@DESTDIR="$(DESTDIR)" cmake --install $(BUILD)

# The Debian package libsdp_VERSION_ARCH.deb in $(DEB_DIR), built in a copy
# of the tree and checked with lintian (scripts/deb.sh).
DEB_DIR ?= $(BUILD)/deb
deb: deps-deb
	@scripts/deb.sh $(DEB_DIR)

demo: build
	@scripts/demo.sh $(BUILD)

bench: build
	@$(BUILD)/bin/sdpperf --all

# The verbs comparison in the soft-RoCE VM (docs/BENCHMARKS-VM.md): SDP,
# rsockets (rstream, librspreload), kernel TCP and raw verbs side by side.
# About 25 minutes; not part of make test.
BENCH_VM_PKGS := $(VM_PKGS) rdmacm-utils
bench-vm: build
	@SDP_EXTRA_PKGS="$(BENCH_VM_PKGS)" scripts/install-deps.sh
	@scripts/vm-run -t 1800 -- bash scripts/bench-vm.sh $(BUILD) 3

# Coverage-guided fuzzing of every decoder with libFuzzer (clang).
fuzz: deps
	@scripts/fuzz.sh

clean:
	rm -rf $(BUILD) $(BUILD_ASAN) $(BUILD_TSAN) build-fuzz
