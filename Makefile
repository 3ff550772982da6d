# SPDX-License-Identifier: Apache-2.0
# pacerd — build, run and test.
#
#   make            build build/pacerd (and nothing else)
#   make run        install missing dependencies, build, start with conf/pacerd.yaml
#   make test       install missing dependencies, build, make lint, run every unit and integration test
#   make test SAN=1 the same under AddressSanitizer + UndefinedBehaviorSanitizer
#   make valgrind   unit and integration tests under valgrind (errors and leaks fail it)
#   make container-test  build the image with podman and test it against the mock
#                   (make test runs it too when podman is installed)
#   make bench      scripts/bench.sh: pacerd against nginx (throughput, CPU, latency,
#                   system calls, SSE, idle streams, lanes); table + $(BUILD)/bench.json
#   make bench-lanes  build build/bench-lanes (bytes per lane, dispatch time vs. lanes and depth)
#   make microbench ns per call of the per-request pure work (tests/bench)
#   make lint       scripts/lint.sh: clang-format check, banned functions, cppcheck,
#                   the direction of includes between the folders of src/, provider
#                   headers and error codes kept in src/provider/
#   make format     clang-format -i over every source (what make lint checks)
#   make man        the manual pages, man/*.scd -> $(BUILD)/man/ (scdoc)
#   make deb        the Debian package, $(BUILD)/deb/pacerd_*.deb (dpkg-buildpackage)
#   make dist       the source tarball of HEAD, $(BUILD)/dist/pacerd-VERSION.tar.gz and
#                   its .sha256 (reproducible: the same bytes every time)
#   make version    print the version (scripts/version.sh)
#
# Every object goes to $(BUILD) so that sanitizer and plain builds never mix.

CC      ?= cc
SAN     ?= 0
BUILD   ?= build$(if $(filter 1,$(SAN)),-san,)

PKGS      := libevent libevent_openssl libcurl jansson yaml-0.1 libssl libcrypto hiredis
# libhttp-parser and libwslay ship no pkg-config file: linked by name.
HTTP_PARSER_LIBS := -lhttp_parser -lwslay
MOCK_PKGS := libevent libevent_openssl libssl libcrypto jansson
PKG_CFLAGS   = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS     = $(shell pkg-config --libs $(PKGS) 2>/dev/null) $(HTTP_PARSER_LIBS)
MOCK_CFLAGS  = $(shell pkg-config --cflags $(MOCK_PKGS) 2>/dev/null)
MOCK_LIBS    = $(shell pkg-config --libs $(MOCK_PKGS) 2>/dev/null) -lwslay
CHECK_CFLAGS = $(shell pkg-config --cflags check 2>/dev/null)
CHECK_LIBS   = $(shell pkg-config --libs check 2>/dev/null)

WARN    := -Wall -Wextra -Werror -Wshadow -Wpointer-arith -Wstrict-prototypes \
           -Wmissing-prototypes -Wformat=2 -Wno-format-nonliteral -Wundef
CFLAGS  ?= -O2 -g
CFLAGS  += -std=c11 -D_GNU_SOURCE -fno-strict-aliasing $(WARN) -MMD -MP
LDFLAGS ?=
# persist.c writes the state file from a thread of its own.
CFLAGS  += -pthread
LDFLAGS += -pthread
ifeq ($(SAN),1)
CFLAGS  += -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -O1
LDFLAGS += -fsanitize=address,undefined
# A small quarantine: the slow-reader test measures pacerd's RSS, which ASan's
# default 256 MiB of quarantined (freed) stream chunks would swamp.
export ASAN_OPTIONS ?= quarantine_size_mb=8:detect_leaks=1
export UBSAN_OPTIONS ?= print_stacktrace=1
endif

# Sources by glob: src/main.c and one folder per layer (docs/development.md);
# the unit tests mirror the folders.
SRC_DIRS  := core http proxy sched provider store admin cli
SRCS      := src/main.c $(sort $(foreach d,$(SRC_DIRS),$(wildcard src/$(d)/*.c)))
HDRS      := $(sort $(wildcard src/*.h $(foreach d,$(SRC_DIRS),src/$(d)/*.h)))
LIB_SRCS  := $(filter-out src/main.c,$(SRCS))
OBJS      := $(SRCS:src/%.c=$(BUILD)/src/%.o)
LIB_OBJS  := $(LIB_SRCS:src/%.c=$(BUILD)/src/%.o)
UNIT_SRCS := $(sort $(wildcard tests/unit/*/test_*.c))
UNIT_BINS := $(UNIT_SRCS:tests/unit/%.c=$(BUILD)/tests/%)
MOCK_SRCS := $(sort $(wildcard tests/mock/*.c))

# libFuzzer harnesses (clang): one per parser, linked with the pure modules
# built for fuzzing in their own tree.
FUZZ_BUILD    := build-fuzz
FUZZ_SRCS     := $(sort $(wildcard tests/fuzz/fuzz_*.c))
FUZZ_BINS     := $(FUZZ_SRCS:tests/fuzz/%.c=$(FUZZ_BUILD)/%)
FUZZ_LIB_OBJS := $(LIB_SRCS:src/%.c=$(FUZZ_BUILD)/src/%.o)
FUZZ_SAN      := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_CFLAGS   := -std=c11 -D_GNU_SOURCE -g -O1 $(WARN) $(FUZZ_SAN)
FUZZ_SECONDS  ?= 60

.PHONY: all run demo test unit integration container-test valgrind bench bench-lanes microbench \
        deps node-deps clean format lint fuzz fuzz-run install man deb dist version FORCE
.DEFAULT_GOAL := all

all: $(BUILD)/pacerd

# The version (scripts/version.sh: git describe, or a tarball's VERSION file) is
# compiled into core/version.o alone; the stamp changes only when the version
# does, so a new commit rebuilds one object and relinks.
VERSION := $(shell ./scripts/version.sh)
$(BUILD)/src/core/version.o: CPPFLAGS += -DPACERD_VERSION_STRING='"$(VERSION)"'
$(BUILD)/src/core/version.o: $(BUILD)/version.stamp
$(BUILD)/version.stamp: FORCE
	@mkdir -p $(dir $@)
	@echo '$(VERSION)' | cmp -s - $@ || echo '$(VERSION)' >$@
FORCE:

version:
	@echo '$(VERSION)'

$(BUILD)/pacerd: $(OBJS)
	$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS) -lm

# Every include names its folder ("sched/gcra.h"), so -Isrc is the one path.
$(BUILD)/src/%.o: src/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(PKG_CFLAGS) -Isrc -c -o $@ $<

# The status page, src/admin/page.html, compiled in as the bytes of a C array
# that src/admin/page.c includes. od and sed are in every Debian system (xxd
# is in vim-common, often missing); an array of bytes, unlike a string
# literal, needs no escaping and has no length limit. One generated file per
# build tree (gcc/clang builds, the fuzz build).
%/gen/admin/page_html.inc: src/admin/page.html
	@mkdir -p $(dir $@)
	od -An -v -tx1 $< | sed 's/ *\([0-9a-f][0-9a-f]\)/0x\1,/g' >$@.tmp && mv $@.tmp $@
$(BUILD)/src/admin/page.o: $(BUILD)/gen/admin/page_html.inc
$(BUILD)/src/admin/page.o: CPPFLAGS += -I$(BUILD)/gen
$(FUZZ_BUILD)/src/admin/page.o: $(FUZZ_BUILD)/gen/admin/page_html.inc
$(FUZZ_BUILD)/src/admin/page.o: FUZZ_CFLAGS += -I$(FUZZ_BUILD)/gen

$(BUILD)/tests/%.o: tests/unit/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Wno-missing-prototypes $(PKG_CFLAGS) $(CHECK_CFLAGS) -Isrc -Itests/unit -Itests -c -o $@ $<

$(BUILD)/tests/%: $(BUILD)/tests/%.o $(LIB_OBJS)
	$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS) $(CHECK_LIBS) -lm

# test_gradient runs the latency controller against pacerd-mock's engine scheduler
# (pure: tests/unit/sched/engine_lane.h), the one model of an engine that queues.
$(BUILD)/mock/mock_engine_sched.o: tests/mock/mock_engine_sched.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<
$(BUILD)/tests/sched/test_gradient: $(BUILD)/mock/mock_engine_sched.o

# Microbenchmarks: linked with the library objects like the unit tests; not
# part of all or test.
$(BUILD)/bench/%.o: tests/bench/%.c | $(BUILD)/bench
	$(CC) $(CFLAGS) $(PKG_CFLAGS) -Isrc -c -o $@ $<

$(BUILD)/bench-lanes: $(BUILD)/bench/bench_lanes.o $(LIB_OBJS)
	$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS) -lm

# make bench's floor row: libevent in, libcurl multi out, nothing else.
$(BUILD)/bench-floor: $(BUILD)/bench/floor.o
	$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS) -lm

$(BUILD)/pacerd-mock: $(MOCK_SRCS) $(wildcard tests/mock/*.h) | $(BUILD)
	$(CC) $(CFLAGS) $(MOCK_CFLAGS) -o $@ $(MOCK_SRCS) $(LDFLAGS) $(MOCK_LIBS) -lm

$(BUILD) $(BUILD)/bench:
	mkdir -p $@

$(FUZZ_BUILD)/src/%.o: src/%.c
	@mkdir -p $(dir $@)
	clang $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link $(PKG_CFLAGS) -Isrc -c -o $@ $<

$(FUZZ_BUILD)/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_LIB_OBJS)
	clang $(FUZZ_CFLAGS) -fsanitize=fuzzer $(PKG_CFLAGS) -Isrc -Itests/unit -o $@ $^ $(PKG_LIBS) -lm

fuzz: $(FUZZ_BINS)

# make fuzz-run FUZZ_SECONDS=300: each harness for that long, new inputs kept
# in a scratch corpus; `make test` runs a short deterministic pass instead.
fuzz-run: fuzz
	./tests/run-fuzz.sh $(FUZZ_SECONDS) $(FUZZ_BINS)

deps:
	./scripts/install-deps.sh

node-deps: deps
	./scripts/install-node-deps.sh

run:
	./scripts/install-deps.sh run
	$(MAKE) all
	./$(BUILD)/pacerd -c conf/pacerd.yaml

unit: $(UNIT_BINS)
	./tests/run-unit.sh $(UNIT_BINS)

integration: $(BUILD)/pacerd $(BUILD)/pacerd-mock
	PACERD_BIN=$(BUILD)/pacerd MOCK_BIN=$(BUILD)/pacerd-mock node tests/integration/run.mjs

# make container-test: scripts/container-test.sh (podman; the first run makes the
# debian:12-slim base image with debootstrap, about 30 s, and builds the image).
container-test: $(BUILD)/pacerd-mock
	BUILD=$(BUILD) ./scripts/container-test.sh

# make test: set-up, then lint (scripts/lint.sh, the same as make lint), unit,
# integration, package (tests/package/run.sh; the Debian package with podman)
# and (with podman) container tests; a failed lint check fails it;
# the last line is the total.
# Without -j of its own (CI: a plain `make test`), the build uses every core.
test: node-deps
	$(MAKE) $(if $(filter -j%,$(MAKEFLAGS)),,-j$(shell nproc 2>/dev/null || echo 2)) all $(UNIT_BINS) $(BUILD)/pacerd-mock fuzz man
	BUILD=$(BUILD) FUZZ_BINS="$(FUZZ_BINS)" LINT=./scripts/lint.sh ./tests/run-all.sh $(UNIT_BINS)

# make lint: every check prints file:line: what; about 10 s (LINT_JOBS, 2).
# `./scripts/lint.sh banned imports` runs only those checks.
lint: deps
	./scripts/lint.sh

# make demo: the mock upstream at 60 RPM per key, pacerd in front with no plan,
# pacerd top, 100 concurrent requests; ends by itself with a summary.
demo: deps
	$(MAKE) all $(BUILD)/pacerd-mock
	BUILD=$(BUILD) ./scripts/demo.sh

# make valgrind: every unit test (in one process: CK_FORK=no) and every integration
# test (pacerd under valgrind; timing bounds × 10) with memcheck; an error or a
# definite/indirect leak fails it. About 17 minutes.
VALGRIND_UNIT := valgrind -q --leak-check=full --show-leak-kinds=definite,indirect \
                 --errors-for-leak-kinds=definite,indirect --error-exitcode=99
# test_store_script judges the Lua scripts' decisions inside redis-server within
# windows of 0.5-10 ms that a client under memcheck cannot poll within on a busy
# machine: it runs natively here (its subject is not under memcheck either way;
# store_script.c runs under memcheck inside pacerd in the integration suite), judged
# in full, never skipped.
VALGRIND_NATIVE := test_store_script
valgrind: node-deps
	$(MAKE) all $(UNIT_BINS) $(BUILD)/pacerd-mock
	CK_FORK=no UNIT_WRAPPER="$(VALGRIND_UNIT)" UNIT_NATIVE="$(VALGRIND_NATIVE)" ./tests/run-unit.sh $(UNIT_BINS)
	PACERD_BIN=$(BUILD)/pacerd MOCK_BIN=$(BUILD)/pacerd-mock PACERD_WRAPPER=valgrind node tests/integration/run.mjs

# make bench: about 10 minutes; BENCH_DURATION (s per run, 5), BENCH_REPS (3),
# BENCH_JSON (output, $(BUILD)/bench.json) and the others in scripts/bench.sh.
# The lane microbenchmark is built and run when its source exists.
bench: deps
	./scripts/install-deps.sh bench
	$(MAKE) all $(BUILD)/pacerd-mock $(BUILD)/bench-floor $(if $(wildcard tests/bench/bench_lanes.c),bench-lanes)
	BUILD=$(BUILD) ./scripts/bench.sh

# Builds only (scripts/bench.sh runs it): $(BUILD)/bench-lanes prints one JSON object.
bench-lanes: $(BUILD)/bench-lanes

# make microbench: ns per call of the per-request pure work (tests/bench).
$(BUILD)/bench_%: tests/bench/bench_%.c $(LIB_OBJS)
	$(CC) $(CFLAGS) -Wno-missing-prototypes $(PKG_CFLAGS) -Isrc -o $@ $< $(LIB_OBJS) $(LDFLAGS) $(PKG_LIBS) -lm

microbench: $(BUILD)/bench_tokens $(BUILD)/bench_usage $(BUILD)/bench_retry
	./$(BUILD)/bench_tokens
	./$(BUILD)/bench_usage
	./$(BUILD)/bench_retry

# Manual pages: one scdoc source each in man/, rendered to $(BUILD)/man/.
MAN_SRCS  := $(sort $(wildcard man/*.scd))
MAN_PAGES := $(MAN_SRCS:man/%.scd=$(BUILD)/man/%)

man: $(MAN_PAGES)

$(BUILD)/man/%: man/%.scd
	@mkdir -p $(dir $@)
	scdoc <$< >$@

PREFIX  ?= /usr/local
DESTDIR ?=
UNITDIR ?= /etc/systemd/system
MANDIR  ?= $(PREFIX)/share/man
# make install: the binary, the manual pages, the systemd unit (its paths
# rewritten to PREFIX), and the documented configuration in /etc/pacerd (an
# existing one is kept). The Debian package installs through this target too
# (debian/rules: PREFIX=/usr UNITDIR=/lib/systemd/system).
install: all man
	install -D -m 0755 $(BUILD)/pacerd $(DESTDIR)$(PREFIX)/bin/pacerd
	for p in $(MAN_PAGES); do \
		install -D -m 0644 $$p $(DESTDIR)$(MANDIR)/man$${p##*.}/$${p##*/} || exit 1; done
	mkdir -p $(DESTDIR)$(UNITDIR)
	sed 's,/usr/local/bin/,$(PREFIX)/bin/,g' systemd/pacerd.service >$(DESTDIR)$(UNITDIR)/pacerd.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/pacerd.service
	test -e $(DESTDIR)/etc/pacerd/pacerd.yaml || \
		install -D -m 0644 conf/pacerd.yaml $(DESTDIR)/etc/pacerd/pacerd.yaml

# make deb: dpkg-buildpackage -us -uc -b in a copy of the tree under
# $(BUILD)/deb/src, so that the package, .buildinfo and .changes land in
# $(BUILD)/deb/ rather than beside the checkout; about 30 s.
# The package's version is the program's (VERSION, written into the copy, which
# has no .git): debian/changelog's newest entry is stamped with it.
deb:
	rm -rf $(BUILD)/deb && mkdir -p $(BUILD)/deb/src
	tar --exclude='./build*' --exclude=./.git --exclude=node_modules --exclude=./tests/integration/.tmp \
		-cf - . | tar -xf - -C $(BUILD)/deb/src
	echo '$(VERSION)' >$(BUILD)/deb/src/VERSION
	sed -i '1s/([^)]*)/($(VERSION)-1)/' $(BUILD)/deb/src/debian/changelog
	cd $(BUILD)/deb/src && dpkg-buildpackage -us -uc -b
	@ls $(BUILD)/deb/*.deb

# make dist: scripts/dist.sh (git archive of HEAD, a VERSION file, tar and gzip
# without timestamps or owners).
dist:
	BUILD=$(BUILD) ./scripts/dist.sh

format:
	clang-format -i $(SRCS) $(HDRS) $(UNIT_SRCS) tests/unit/*.h tests/unit/*/*.h tests/mock/*.[ch] tests/bench/*.c tests/fuzz/*.c

clean:
	rm -rf build build-san $(FUZZ_BUILD)

-include $(OBJS:.o=.d) $(UNIT_BINS:%=%.d) $(BUILD)/bench/bench_lanes.d $(BUILD)/mock/mock_engine_sched.d
