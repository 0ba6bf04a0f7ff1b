# Conduit — the two commands:
#   make run    install what is missing, build, start conduit-standalone on ./data
#   make test   install what is missing, build, run every test
BUILD_DIR ?= build
BUILD_TYPE ?= RelWithDebInfo
LISTEN ?= 127.0.0.1:7070
METRICS_LISTEN ?= 127.0.0.1:9464
DATA_DIR ?= ./data
JOBS ?= $(shell nproc)

.PHONY: all deps configure build run test bench clean

all: build

deps:
	@./scripts/install-deps.sh

$(BUILD_DIR)/build.ninja: CMakeLists.txt | deps
	@cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) >/dev/null

configure: deps $(BUILD_DIR)/build.ninja

build: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS)

run: build
	@mkdir -p $(DATA_DIR)
	@echo "starting conduit-standalone (data in $(DATA_DIR)); Ctrl-C stops it"
	@exec $(BUILD_DIR)/bin/conduit-standalone --data-dir $(DATA_DIR) --listen $(LISTEN) --metrics-listen $(METRICS_LISTEN)

test: build
	@./scripts/polyglot-deps.sh
	@cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) --timeout 600

bench: build
	@$(BUILD_DIR)/bin/log_bench

clean:
	rm -rf $(BUILD_DIR)
