# tfd: make run builds bin/tfd and serves the bundled model on 127.0.0.1:8417; make test runs the
# tests; sudo bin/tfd install (after make build) installs the service.
GO ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# The release targets: Apple silicon Macs, and Linux on x86-64.
RELEASES := darwin/arm64 linux/amd64

.PHONY: run test test-openai vet build darwin release clean test-cuda test-metal

# run builds bin/tfd and serves the bundled model. exec hands the process to tfd, which exits 0
# on Ctrl-C, so make reports no error (go run turned the interrupt into exit status 1).
run: build
	exec bin/tfd serve

# test runs every test, then the concurrent packages again under the race detector (-short: the
# soak runs once, in the first pass; under the race detector it would take minutes).
test: vet
	$(GO) test ./...
	$(GO) test -race -short ./scheduler ./daemon/... ./cpu ./engine

# test-openai talks to a real tfd with the official openai-go client. It is apart from test because
# compiling that client takes a minute or two on a small machine; .ci/run runs both.
test-openai:
	$(GO) vet -tags openai ./cmd/tfd ./daemon/api
	$(GO) test -tags openai ./cmd/tfd -run '^(TestServe|TestServeSurface|TestServeStructured)$$'
	$(GO) test -tags openai ./daemon/api -run '^TestOpenAI'

vet:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet ./...

# build says what it does first: a first build fetches the modules and compiles for a minute or
# two without a word of its own.
build:
	@echo "building bin/tfd (the first build fetches and compiles the modules: a minute or two)"
	CGO_ENABLED=0 $(GO) build -o bin/tfd ./cmd/tfd

# darwin builds and vets the Mac target from here, so a Mac build never silently breaks.
darwin:
	GOOS=darwin GOARCH=arm64 CGO_ENABLED=0 $(GO) build ./...
	GOOS=darwin GOARCH=arm64 CGO_ENABLED=0 $(GO) vet ./...

# test-cuda builds the CUDA test binary here (the GPU machine has no Go); run it there from the
# repository root as cuda/README.md shows. Elsewhere its GPU tests skip and say why.
test-cuda:
	CGO_ENABLED=0 $(GO) test -c -o bin/cuda.test ./cuda

# test-metal runs the Metal backend's tests on a Mac with Apple silicon (docs/metal.md): each op
# against the cpu backend, batch invariance, the engine against the transformers oracle,
# concurrent and drafted replies, then first token after idle (about three minutes; -short skips
# it) and decode speed, printed as a table for docs/metal.md. Elsewhere they skip and say why.
test-metal:
	CGO_ENABLED=0 $(GO) test -count=1 -v -timeout 30m ./metal

# release builds dist/tfd-VERSION-OS-ARCH.tar.gz for each of RELEASES: the static binary, the
# documented default config, the service files install writes, and the README.
release: $(foreach r,$(RELEASES),dist/tfd-$(VERSION)-$(subst /,-,$(r)).tar.gz)

dist/tfd-$(VERSION)-%.tar.gz: FORCE
	@set -e; os=$$(echo $* | cut -d- -f1); arch=$$(echo $* | cut -d- -f2); \
	stage=dist/tfd-$(VERSION)-$*; rm -rf $$stage; mkdir -p $$stage; \
	GOOS=$$os GOARCH=$$arch CGO_ENABLED=0 $(GO) build -trimpath \
		-ldflags "-s -w -X main.buildVersion=$(VERSION)" -o $$stage/tfd ./cmd/tfd; \
	cp README.md configs/tfd.toml $$stage/; cp -R packaging $$stage/; \
	tar -C dist -czf $@ tfd-$(VERSION)-$*; rm -rf $$stage; echo "built $@"

FORCE:

clean:
	rm -rf bin dist
