# libsdp — top-level entry points.  `make demo` and `make test` do all set-up:
# they install missing Debian packages (as root, via apt-get), build, and run.
BUILD      ?= build
BUILD_ASAN ?= build-asan
GENERATOR  := $(shell command -v ninja >/dev/null 2>&1 && echo Ninja || echo "Unix Makefiles")

.PHONY: all deps build build-asan test test-quick demo bench clean fuzz

all: build

deps:
	@scripts/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD) -G "$(GENERATOR)" >/dev/null
	@cmake --build $(BUILD) -j2

build-asan: deps
	@cmake -S . -B $(BUILD_ASAN) -G "$(GENERATOR)" -DSDP_SANITIZE=asan >/dev/null
	@cmake --build $(BUILD_ASAN) -j2

# Every test: unit, fuzz-corpus replay, integration over shm, and the whole
# suite again under ASan+UBSan.
test: build build-asan
	@tests/run.sh $(BUILD)
	@SDP_TEST_SANITIZER=asan tests/run.sh $(BUILD_ASAN)

# Fast subset for development (no sanitizer pass).
test-quick: build
	@tests/run.sh $(BUILD)

demo: build
	@scripts/demo.sh $(BUILD)

bench: build
	@$(BUILD)/bin/sdpperf --all

# Coverage-guided fuzzing of every decoder with libFuzzer (clang).
fuzz: deps
	@scripts/fuzz.sh

clean:
	rm -rf $(BUILD) $(BUILD_ASAN) build-fuzz
