# Conduit — the two commands:
#   make run    install what is missing, build, start conduit-standalone on ./data
#   make test   install what is missing, build, run every test
# A local cluster: etcd, three conduit-broker in cluster mode, the coordinator, the queue:
#   make cluster  install what is missing, build, start them on free ports (state in ./.cluster);
#                 prints the addresses; Ctrl-C stops them all (scripts/run-cluster.sh)
# Deployment (docs/OPERATIONS.md, "Deploy"):
#   make deploy-check  the Helm/compose/alert checks alone (no C++ build; `make test` runs them too)
#   make image         build the container images (podman or docker; docker/Dockerfile, and
#                      conduit-etcd from docker/etcd.Dockerfile for cluster mode)
#   make image-smoke   build it, run conduit-standalone in it, check gRPC health from outside
# Client stubs (proto/README.md): make stubs   Python stubs from proto/ in ./stubs/python
# TLS (docs/SECURITY.md, "TLS"):
#   make certs    a dev CA, a server certificate (127.0.0.1, localhost) and two client certificates
#                 in certs/dev/ (gitignored; kept if present, FORCE=1 replaces them)
BUILD_DIR ?= build
BUILD_TYPE ?= RelWithDebInfo
LISTEN ?= 127.0.0.1:7070
METRICS_LISTEN ?= 127.0.0.1:9464
DATA_DIR ?= ./data
JOBS ?= $(shell nproc)

IMAGE ?= conduit:$(shell sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\} *$$/\1/p' helm/conduit/Chart.yaml)

.PHONY: all deps configure build build-run build-cluster run stubs cluster test fuzz bench bench-peers bench-security clean deploy-deps deploy-check image image-smoke certs

all: build

deps:
	@./scripts/install-deps.sh

$(BUILD_DIR)/build.ninja: CMakeLists.txt | deps
	@cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) >/dev/null

configure: deps $(BUILD_DIR)/build.ninja

build: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS)

# `make run` and `make cluster` build only the binaries they start, not the tests and benchmarks.
RUN_TARGETS = conduit-standalone conduit
CLUSTER_TARGETS = conduit-broker conduit-coordinator conduit-queue conduit

build-run: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS) --target $(RUN_TARGETS)

build-cluster: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS) --target $(CLUSTER_TARGETS)

run: build-run
	@mkdir -p $(DATA_DIR)
	@echo "starting conduit-standalone (data in $(DATA_DIR)); Ctrl-C stops it"
	@exec $(BUILD_DIR)/bin/conduit-standalone --data-dir $(DATA_DIR) --listen $(LISTEN) --metrics-listen $(METRICS_LISTEN)

cluster: build-cluster
	@exec ./scripts/run-cluster.sh $(BUILD_DIR)/bin

test: build deploy-deps
	@./scripts/polyglot-deps.sh
	@cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) --timeout 600

# The libFuzzer targets, 60 s each (FUZZ_SECONDS=...); `make test` runs them 5 s each.
FUZZ_SECONDS ?= 60
fuzz: deps
	@./scripts/fuzz.sh $(FUZZ_SECONDS) $(BUILD_DIR)/fuzz

bench: build
	@$(BUILD_DIR)/bin/log_bench

# Conduit side by side with Redis Streams, NATS JetStream and beanstalkd; writes docs/BENCHMARKS.md.
bench-peers: build
	@./scripts/bench-peers.sh

# peer_bench's producer-1, tail-1 and batch-cycle-8 against plaintext and mTLS + token + ACLs;
# prints rates and the overhead (target <= 15%). BENCH_SECURITY_ARGS: e.g. --secure=tls.
bench-security: build
	@CONDUIT_BIN_DIR=$(BUILD_DIR)/bin ./scripts/bench-security.sh $(BENCH_SECURITY_ARGS)

deploy-deps: deps
	@./scripts/deploy-deps.sh

# The same checks ctest runs as deploy_checks (label deploy), without building C++.
deploy-check: deploy-deps
	@./scripts/check-deploy.sh

STUBS_DIR ?= stubs
stubs: deps
	@./scripts/make-stubs.sh $(STUBS_DIR)

CERTS_DIR ?= certs/dev
certs:
	@./scripts/make-certs.sh $(CERTS_DIR) $(if $(FORCE),--force)

image:
	@./scripts/install-deps.sh --image
	@./scripts/build-image.sh $(IMAGE)

image-smoke:
	@./scripts/install-deps.sh --image
	@./scripts/image-smoke.sh $(IMAGE)

clean:
	rm -rf $(BUILD_DIR)
