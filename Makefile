# tfd: make run serves the bundled model on 127.0.0.1:8417; make test runs the tests.
GO ?= go

.PHONY: run test vet build darwin

run:
	$(GO) run ./cmd/tfd serve

test: vet
	$(GO) test ./...

vet:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet ./...

build:
	CGO_ENABLED=0 $(GO) build -o bin/tfd ./cmd/tfd

# darwin builds and vets the Mac target from here, so a Mac build never silently breaks.
darwin:
	GOOS=darwin GOARCH=arm64 CGO_ENABLED=0 $(GO) build ./...
	GOOS=darwin GOARCH=arm64 CGO_ENABLED=0 $(GO) vet ./...
