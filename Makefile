# Tally — the commands of the README. Every target installs what it needs.
SHELL := /bin/bash
JOBS ?= $(shell nproc)
BUILD ?= build
CMAKE_FLAGS ?=
# ccache keeps compiled objects in $HOME/.cache/ccache, outside the repository,
# so a second run of the test command (or CI on the same machine) rebuilds fast.
# (Evaluated by the shell when the recipe runs, i.e. after `deps` installed it.)
# BASEDIR/NOHASHDIR let a fresh clone in another folder reuse the same objects.
export CCACHE_BASEDIR := $(CURDIR)
export CCACHE_NOHASHDIR := 1
export CCACHE_MAXSIZE := 5G
LAUNCHER = $$(command -v ccache >/dev/null 2>&1 && echo -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
DEB_PACKAGES := build-essential cmake ninja-build pkg-config curl ca-certificates git \
  libsimdjson-dev libprotobuf-dev protobuf-compiler libboost-dev libboost-system-dev \
  libssl-dev libyaml-cpp-dev libcli11-dev libfmt-dev libgtest-dev libgmock-dev \
  libbenchmark-dev prometheus-cpp-dev lcov clang clang-format-14 libclang-rt-14-dev openssl python3-yaml ccache golang-go

.PHONY: fuzz deps build demo-build test test-unit test-sanitizers sanitizer-trees sanitizer-tests test-e2e test-image test-kind demo demo-down bench coverage cluster-binaries clean format format-check

deps:
	@missing=$$(for p in $(DEB_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; done); \
	if command -v go >/dev/null; then missing=$$(echo "$$missing" | grep -v '^golang-go$$'); fi; \
	missing=$$(echo $$missing); \
	if [ -n "$$missing" ]; then echo "installing: $$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	else echo "deps: all Debian packages present"; fi

# Every part switched on explicitly: an OFF cached in $(BUILD) by an earlier
# configure would otherwise drop the e2e tests, benches or fuzzers unseen.
# Optimised, with line tables only (-g1): backtraces, perf and sanitizer-style
# reports still name functions and lines; full debug info (-g) made the tree's
# compile a third slower (informers.cpp 63 s vs 40 s, property_test.cpp 21 vs 13).
CONFIGURE = cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  '-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG' $(LAUNCHER) \
	  -DTALLY_E2E=ON -DTALLY_BENCH=ON -DTALLY_CODEC_FUZZ=ON -DTALLY_SANITIZE= -DTALLY_COVERAGE=OFF $(CMAKE_FLAGS)
build: deps
	$(CONFIGURE)
	cmake --build $(BUILD) -j $(JOBS)

# What the demo runs, and nothing else: its three binaries (not the tests,
# benches and fuzzers `build` adds), in the same tree, so a later `make
# build` or `make test` reuses every object.
DEMO_TARGETS := tally-extender tally-controller tallyctl
demo-build: deps
	$(CONFIGURE)
	cmake --build $(BUILD) -j $(JOBS) --target $(DEMO_TARGETS)

cluster-binaries: deps
	./e2e/cluster/build-binaries.sh

# C++ sources as .clang-format lays them out (clang-format 14, Debian 12).
CLANG_FORMAT ?= clang-format-14
FORMATTED = $$(git ls-files '*.cpp' '*.hpp')

format: deps
	@command -v $(CLANG_FORMAT) >/dev/null || { echo "format: $(CLANG_FORMAT) not found (make deps installs it)"; exit 1; }
	$(CLANG_FORMAT) --style=file -i $(FORMATTED)

# Fails naming every file clang-format would change (run `make format`).
format-check: deps
	@command -v $(CLANG_FORMAT) >/dev/null || { echo "format-check: $(CLANG_FORMAT) not found (make deps installs it)"; exit 1; }
	@bad=$$(for f in $(FORMATTED); do $(CLANG_FORMAT) --style=file "$$f" | cmp -s "$$f" - || echo "$$f"; done); \
	if [ -n "$$bad" ]; then echo "not formatted (make format):"; echo "$$bad"; exit 1; else echo "format-check: all C++ sources formatted"; fi

# The test command: every part, plus the sanitizer builds.
# A test that skips itself fails the command unless tests/allowed-skips.txt
# names it with the reason (ctest's JUnit report says which were skipped).
# The control plane's Go build and the C++ build run side by side (the go
# command fetches modules while the compilers run). Then, while CTest runs the
# main tree's tests (mostly e2e tests waiting on their control plane), the
# sanitizer trees are built at the lowest CPU priority; their tests run after
# CTest, on idle cores. Lowest means against every process: the control planes
# the e2e tests start run in sessions of their own (setsid), and with the
# kernel's autogroups a nice value only ranks processes inside one session, so
# the build gets a session of its own whose autogroup is niced to 19 as well
# (without that, CI saw the compilers take half of kube-apiserver's core).
test: deps format-check
	$(MAKE) --no-print-directory -j 2 cluster-binaries build
	@rm -f $(BUILD)/sanitizer-trees.rc; \
	( setsid -w sh -c 'echo 19 >/proc/self/autogroup 2>/dev/null; exec nice -n 19 "$$0" --no-print-directory sanitizer-trees' \
	    "$(MAKE)" </dev/null >$(BUILD)/sanitizer-trees.log 2>&1; \
	  echo $$? >$(BUILD)/sanitizer-trees.rc ) & \
	echo "sanitizer trees building in the background (nice 19): $(BUILD)/sanitizer-trees.log"; \
	(cd $(BUILD) && ctest --output-on-failure -j 1 --output-junit $(CURDIR)/$(BUILD)/ctest-junit.xml); rc=$$?; \
	wait; \
	if [ "$$(cat $(BUILD)/sanitizer-trees.rc 2>/dev/null)" != 0 ]; then \
	  tail -50 $(BUILD)/sanitizer-trees.log; echo "test: building the sanitizer trees failed ($(BUILD)/sanitizer-trees.log)"; exit 1; fi; \
	echo "sanitizer trees built"; exit $$rc
	./tests/check-skips.py $(BUILD)/ctest-junit.xml tests/allowed-skips.txt
	$(MAKE) --no-print-directory sanitizer-tests

test-unit: build
	cd $(BUILD) && ctest --output-on-failure -LE e2e

test-e2e: cluster-binaries build
	cd $(BUILD) && ctest --output-on-failure -L e2e

# The container image alone (also in `make test`: CTest label image).
test-image: build
	cd $(BUILD) && ctest --output-on-failure -L image

# Tally on kind without any registry (e2e/kind/README.md): a private Docker
# engine, the node image built from the pinned sources and Debian packages, the
# image of the Dockerfile with this build's binaries, manifests/ applied, the
# e2e suite against the cluster; everything it started is removed at the end.
test-kind: deps cluster-binaries build
	TALLY_BUILD_DIR=$(CURDIR)/$(BUILD) TALLY_PREBUILT_BIN=$(CURDIR)/$(BUILD)/bin ./e2e/kind/run.sh --offline

# ASan+UBSan over everything but e2e; TSan over the concurrent parts.
# Debug trees with line tables only (-g1): sanitizer reports still name file
# and line, and the compilers write a fraction of the debug information.
SANITIZER_TREE_FLAGS = -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-g1 $(LAUNCHER) \
	  -DTALLY_E2E=OFF -DTALLY_BENCH=OFF -DTALLY_CODEC_FUZZ=OFF
# The targets of the tests labelled `concurrent` (test name == target name).
TSAN_TARGETS = $$(cd build-tsan && ctest -N -L concurrent 2>/dev/null | grep -oE 'Test +\#[0-9]+: [A-Za-z0-9_]+' | awk '{print $$3}')
test-sanitizers: sanitizer-trees
	$(MAKE) --no-print-directory sanitizer-tests

sanitizer-trees: deps
	cmake -S . -B build-asan $(SANITIZER_TREE_FLAGS) -DTALLY_SANITIZE=address,undefined
	cmake --build build-asan -j $(JOBS)
	cmake -S . -B build-tsan $(SANITIZER_TREE_FLAGS) -DTALLY_SANITIZE=thread
	@targets="$(TSAN_TARGETS)"; \
	if [ -z "$$targets" ]; then echo "sanitizer-trees: no test is labelled concurrent, so TSan would check nothing"; exit 1; fi; \
	cmake --build build-tsan -j $(JOBS) --target $$targets

sanitizer-tests:
	cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -LE 'e2e|bench-smoke' \
	  --output-junit $(CURDIR)/build-asan/ctest-junit.xml
	./tests/check-skips.py build-asan/ctest-junit.xml tests/allowed-skips.txt
	cd build-tsan && TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" ctest --output-on-failure -L concurrent \
	  --output-junit $(CURDIR)/build-tsan/ctest-junit.xml
	./tests/check-skips.py build-tsan/ctest-junit.xml tests/allowed-skips.txt

coverage: deps
	cmake -S . -B build-cov -G Ninja -DCMAKE_BUILD_TYPE=Debug $(LAUNCHER) -DTALLY_COVERAGE=ON -DTALLY_E2E=OFF -DTALLY_BENCH=OFF -DTALLY_CODEC_FUZZ=OFF
	cmake --build build-cov -j $(JOBS) --target model_test
	find build-cov -name "*.gcda" -delete
	cd build-cov && ctest -R '^model_test$$' --output-on-failure
	lcov --quiet --capture --directory build-cov --output-file build-cov/all.info
	lcov --quiet --extract build-cov/all.info '*/model/src/*' '*/model/include/*' --output-file build-cov/model.info
	lcov --summary build-cov/model.info

# Every libFuzzer target (ASan+UBSan, built by clang in build/codec-fuzz) for
# FUZZ_SECONDS each (default 300), seeded from its checked-in corpus; the test
# command runs each for a bounded time only.
FUZZ_SECONDS ?= 300
fuzz: build
	@set -e; f=$(BUILD)/codec-fuzz; \
	for t in codec_snapshot_fuzzer:codec/fuzz/corpus codec_ledger_configmap_fuzzer:codec/fuzz/ledger-corpus \
	         runtime_admission_review_fuzzer:runtime/admission/fuzz/corpus extender_wire_fuzzer:extender/fuzz/corpus \
	         codec_usage_configmap_fuzzer:codec/fuzz/usage-corpus state_json_watch_fuzzer:codec/fuzz/watch-json-corpus \
	         state_protobuf_watch_fuzzer:codec/fuzz/watch-protobuf-corpus \
	         codec_protobuf_readers_fuzzer:codec/fuzz/watch-protobuf-corpus \
	         codec_admission_objects_fuzzer:codec/fuzz/admission-objects-corpus \
	         runtime_kubeconfig_fuzzer:runtime/fuzz/kubeconfig-corpus \
	         controller_alertmanager_fuzzer:codec/fuzz/alertmanager-corpus; do \
	  name=$${t%%:*}; seeds=$${t#*:}; mkdir -p $(BUILD)/fuzz-work/$$name; \
	  echo "== $$name ($(FUZZ_SECONDS) s)"; \
	  $$f/$$name -max_total_time=$(FUZZ_SECONDS) -timeout=20 -rss_limit_mb=2048 -print_final_stats=1 \
	    $(BUILD)/fuzz-work/$$name $$seeds 2>&1 | grep -E '^(stat::|==|INFO: Running|Done|SUMMARY)' || exit 1; \
	done

# The C++ build and the control plane's Go build side by side: on a cold
# machine the go command spends much of its time fetching modules.
demo: deps
	$(MAKE) --no-print-directory -j 2 demo-build cluster-binaries
	./e2e/demo/demo.sh

demo-down:
	./e2e/demo/demo.sh down

bench: build
	./bench/run.sh

clean:
	rm -rf build build-asan build-tsan build-cov
