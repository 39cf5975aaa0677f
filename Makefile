# Niuma — two commands set everything up on a fresh Debian/Ubuntu machine:
#   make run    build and open the window
#   make test   vet, format check and the whole test suite
SHELL := /bin/bash
GO    ?= go
BIN   := bin/niuma
SUDO  := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

# Fyne's cgo build (OpenGL and X11 headers), and the demo's real PyTorch.
APT_PACKAGES := gcc pkg-config libgl1-mesa-dev libx11-dev libxcursor-dev libxrandr-dev \
	libxinerama-dev libxi-dev libxxf86vm-dev python3-torch python3-sklearn

.PHONY: deps build run test bench lint fuzz clean

deps:
	@command -v $(GO) >/dev/null || { echo "make deps: Go 1.26 or newer is needed (https://go.dev/dl); install it and retry"; exit 1; }
	@missing=""; for p in $(APT_PACKAGES); do \
		dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "make deps: installing system packages:$$missing"; \
		$(SUDO) apt-get update -q && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing; \
	else \
		echo "make deps: system packages present"; \
	fi
	@echo "make deps: fetching Go modules"; $(GO) mod download

build:
	@echo "make build: compiling $(BIN) (the first build compiles Fyne's OpenGL driver: a few minutes)"
	$(GO) build -o $(BIN) .

run: deps build
	./$(BIN)

lint:
	$(GO) vet ./...
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi

test: deps lint
	@echo "make test: ui must build and test without cgo"
	CGO_ENABLED=0 $(GO) test ./ui/...
	@echo "make test: all packages"
	$(GO) test -count=1 ./...

bench:
	$(GO) test -run='^$$' -bench=. -benchmem ./...

# A short fuzzing pass over every parser that reads what users or workloads wrote.
fuzz:
	$(GO) test -run='^$$' -fuzz=FuzzParse -fuzztime=30s ./engine/template/
	$(GO) test -run='^$$' -fuzz=FuzzParseLine -fuzztime=30s ./metrics/

clean:
	rm -rf bin
	$(GO) clean -testcache
