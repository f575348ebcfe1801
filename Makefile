# The two entry points a newcomer needs are `make demo` and `make test` (see README.md).
GO ?= go

.PHONY: test
test:
	gofmt -l . | tee /dev/stderr | (! read -r _)
	$(GO) vet ./...
	$(GO) test -race -count=1 ./...
