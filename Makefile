# Niuma — two commands set everything up on a fresh Debian/Ubuntu machine:
#   make run    build and open the window
#   make test   vet, format check and the whole test suite
SHELL := /bin/bash
GO    ?= go
BIN   := bin/niuma
SUDO  := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

# Fyne's cgo build (OpenGL and X11 headers), the demo's real PyTorch,
# poppler-utils (pdftotext, pdftoppm) with which the report tests read PDFs
# back, and prometheus, the real server the metrics exporter is tested
# against (the test starts its own on a free port; Debian's package also
# enables a system service on :9090, which `systemctl disable --now
# prometheus` turns off), and sqlite3, with which the soak checks the archive.
APT_PACKAGES := gcc pkg-config libgl1-mesa-dev libx11-dev libxcursor-dev libxrandr-dev \
	libxinerama-dev libxi-dev libxxf86vm-dev python3-torch python3-sklearn poppler-utils prometheus sqlite3 busybox-static

# go-nvml's cgo declares every NVML function, deprecated ones too: without
# this, the first build prints a screenful of -Wdeprecated-declarations
# warnings that are not ours. Go's own defaults (-O2 -g) are kept; a
# CGO_CFLAGS in the environment wins.
CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations
export CGO_CFLAGS

.PHONY: deps build run test soak soak-short bench lint fuzz clean demo-image screenshots install uninstall fyne-tool install-system uninstall-system

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

# make test runs in phases, stopping at the first that fails; each ends
# with one line (scripts/phase.sh): its name, passed or FAILED, and its
# time, and every phase's line is printed again at the end. The packages
# in RACE_PACKAGES (.ci/run sets them) are tested under the race detector
# in a phase of their own instead of in "all packages".
RACE_PACKAGES ?=
test: deps
	@phases=$$(mktemp /tmp/niuma-phases.XXXXXX); export NIUMA_PHASES=$$phases; \
	trap 'echo "make test: the phases:"; sed "s/^make test: /  /" "$$phases"; rm -f "$$phases"' EXIT; \
	race="$(RACE_PACKAGES)"; rest=./...; \
	if [ -n "$$race" ]; then \
		raced=$$($(GO) list $$race) && rest=$$($(GO) list ./... | grep -vxF "$$raced") || exit 1; \
	fi; \
	scripts/phase.sh "lint (vet, gofmt)" $(MAKE) --no-print-directory lint && \
	scripts/phase.sh "ui without cgo" env CGO_ENABLED=0 $(GO) test ./ui/... && \
	scripts/phase.sh "all packages" $(GO) test -count=1 $$rest && \
	{ [ -z "$$race" ] || scripts/phase.sh "race detector: $$race" $(GO) test -race -count=1 $$race; } && \
	scripts/phase.sh "short soak, local stages (the owner killed 30 times while runs go on)" scripts/soak.sh $(SOAK_SHORT) && \
	scripts/phase.sh "short soak, stages in Docker containers" scripts/soak.sh --executor docker $(SOAK_SHORT_DOCKER) && \
	if [ "$$(id -u)" = 0 ]; then \
		scripts/phase.sh "two users on one machine (the machine service and both engines killed $(MACHINE_KILLS) times)" \
			scripts/machine-soak.sh --kills $(MACHINE_KILLS); \
	else echo "make test: the two-user soak needs root (it creates two users): skipped; run sudo scripts/machine-soak.sh"; fi

# The soak: `niuma engine` killed with SIGKILL at random moments while runs
# go on, restarted each time; then SQL checks that nothing was lost and
# nothing ran twice (see scripts/soak.sh and docs/RELIABILITY.md).
# SOAK=... changes the long run's arguments, e.g. SOAK="--executor docker".
SOAK_SHORT ?= --runs 24 --kills 30 --min-steps 200 --max-steps 600
SOAK_SHORT_DOCKER ?= --runs 16 --kills 30 --min-steps 200 --max-steps 600
MACHINE_KILLS ?= 60
SOAK       ?= --runs 320 --kills 300 --min-steps 200 --max-steps 2000
soak:
	scripts/soak.sh $(SOAK)

soak-short:
	scripts/soak.sh $(SOAK_SHORT)

bench:
	$(GO) test -run='^$$' -bench=. -benchmem ./...

# A short fuzzing pass over every parser that reads what users or workloads wrote.
fuzz:
	$(GO) test -run='^$$' -fuzz=FuzzParse -fuzztime=30s ./engine/template/
	$(GO) test -run='^$$' -fuzz=FuzzParseLine -fuzztime=30s ./metrics/
	$(GO) test -run='^$$' -fuzz=FuzzString -fuzztime=30s ./printable/
	$(GO) test -run='^$$' -fuzz=FuzzParseLenient -fuzztime=30s ./metrics/
	$(GO) test -run='^$$' -fuzz=FuzzMatch -fuzztime=30s ./metrics/textrule/
	$(GO) test -run='^$$' -fuzz=FuzzPyDict -fuzztime=30s ./metrics/textrule/
	$(GO) test -run='^$$' -fuzz=FuzzDetect -fuzztime=30s ./metrics/
	$(GO) test -run='^$$' -fuzz=FuzzTrainerState -fuzztime=20s ./metrics/
	$(GO) test -run='^$$' -fuzz=FuzzHParams -fuzztime=20s ./metrics/
	$(GO) test -run='^$$' -fuzz=FuzzCSVRow -fuzztime=20s ./metrics/
	$(GO) test -run='^$$' -fuzz=FuzzParseSlurmOutput -fuzztime=30s ./engine/executor/slurm/
	$(GO) test -run='^$$' -fuzz=FuzzRead -fuzztime=30s ./tuner/tabular/
	$(GO) test -run='^$$' -fuzz=FuzzReadMessage -fuzztime=30s ./machine/
	$(GO) test -run='^$$' -fuzz=FuzzParseConfig -fuzztime=30s ./machine/service/

# The real window under Xvfb with simulated GPUs and real demo runs, driven
# to each main view; PNGs in docs/screenshots/ (look at them).
screenshots: deps
	scripts/screenshots.sh
	@if [ "$$(id -u)" = 0 ]; then scripts/screenshots-shared.sh; \
	else echo "make screenshots: the shared machine's screenshots need root (a second user): sudo scripts/screenshots-shared.sh"; fi

clean:
	rm -rf bin
	$(GO) clean -testcache

# A desktop install for you (no root): `fyne package` bundles the binary
# `make build` made (the same flags as every build; fyne's own release build
# binds NVML's symbols eagerly and does not start on a machine without the
# driver) with FyneApp.toml's name, ID, icon and version into a Linux
# bundle, whose binary, .desktop entry and icon go under $(PREFIX); the
# entry's Exec points at the installed binary, so the menu opens it.
# fyne package rewrites FyneApp.toml (it counts builds): it is put back.
# `make uninstall` removes what install wrote.
PREFIX    ?= $(HOME)/.local
APP_ID    := io.niuma.app
FYNE_TOOL ?= fyne.io/tools/cmd/fyne@v1.7.4
FYNE      ?= $(shell command -v fyne 2>/dev/null || echo $$($(GO) env GOPATH)/bin/fyne)
DESKTOP   := $(PREFIX)/share/applications/$(APP_ID).desktop
ICON      := $(PREFIX)/share/icons/hicolor/512x512/apps/$(APP_ID).png

fyne-tool:
	@if [ ! -x "$(FYNE)" ]; then echo "make install: installing the fyne packaging tool ($(FYNE_TOOL))"; $(GO) install $(FYNE_TOOL); fi

install: build fyne-tool
	@tmp=$$(mktemp -d /tmp/niuma-package.XXXXXX); cp FyneApp.toml "$$tmp/FyneApp.toml"; \
	trap 'cp "$$tmp/FyneApp.toml" FyneApp.toml; rm -rf "$$tmp"' EXIT; \
	echo "make install: fyne package (FyneApp.toml) of $(BIN)"; \
	"$(FYNE)" package --os linux --executable $(BIN) --name Niuma --app-id $(APP_ID) --icon assets/icon.png >"$$tmp/package.log" 2>&1 || { cat "$$tmp/package.log"; exit 1; }; \
	tar -C "$$tmp" -xf Niuma.tar.xz && rm -f Niuma.tar.xz; \
	bin=$$(find "$$tmp" -path '*/bin/*' -type f | head -1); desk=$$(find "$$tmp" -name '*.desktop' | head -1); \
	[ -n "$$bin" ] && [ -n "$$desk" ] || { echo "make install: fyne package made no binary or .desktop file"; exit 1; }; \
	install -D -m 755 "$$bin" "$(PREFIX)/bin/niuma"; \
	install -D -m 644 assets/icon.png "$(ICON)"; \
	mkdir -p "$(dir $(DESKTOP))"; \
	sed -e 's|^Exec=.*|Exec=$(PREFIX)/bin/niuma|' -e 's|^Icon=.*|Icon=$(APP_ID)|' "$$desk" > "$(DESKTOP)"; \
	command -v update-desktop-database >/dev/null && update-desktop-database -q "$(dir $(DESKTOP))" || true; \
	echo "make install: installed $(PREFIX)/bin/niuma, $(DESKTOP) and $(ICON)"; \
	case ":$$PATH:" in *":$(PREFIX)/bin:"*) ;; *) echo "make install: add $(PREFIX)/bin to your PATH to run niuma from a terminal";; esac

uninstall:
	rm -f "$(PREFIX)/bin/niuma" "$(DESKTOP)" "$(ICON)"
	@command -v update-desktop-database >/dev/null && update-desktop-database -q "$(dir $(DESKTOP))" || true
	@echo "make uninstall: removed niuma, its menu entry and icon from $(PREFIX) (your runs in \$$NIUMA_HOME stay)"

# The digits-mlp demo's container image, built without any registry: a
# minimal Debian rootfs (debootstrap) with the demo's PyTorch and
# scikit-learn, imported with `docker import`. A few minutes and ~1.5 GB the
# first time; a no-op once the image exists (`docker rmi` it to rebuild).
# The image's Debian (or Ubuntu) comes from this machine's own apt archive
# and suite (scripts/apt-source.sh reads /etc/apt/sources.list{,.d/*},
# deb822 too), else Debian bookworm from deb.debian.org; DEMO_MIRROR and
# DEMO_SUITE override both.
DEMO_IMAGE ?= niuma/digits-mlp:1
APT_SOURCE = $(shell scripts/apt-source.sh 2>/dev/null)
DEMO_MIRROR ?= $(or $(word 1,$(APT_SOURCE)),http://deb.debian.org/debian)
DEMO_SUITE ?= $(or $(word 2,$(APT_SOURCE)),bookworm)
# Ubuntu keeps python3-torch in universe.
DEMO_COMPONENTS ?= $(if $(findstring /ubuntu,$(DEMO_MIRROR)),main$(COMMA)universe,main)
COMMA := ,
demo-image:
	@command -v docker >/dev/null || { echo "make demo-image: docker is not installed"; exit 1; }
	@if docker image inspect $(DEMO_IMAGE) >/dev/null 2>&1; then echo "make demo-image: $(DEMO_IMAGE) is present"; exit 0; fi; \
	command -v debootstrap >/dev/null || { echo "make demo-image: installing debootstrap"; $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap; }; \
	root=$$(mktemp -d /tmp/niuma-demo-rootfs.XXXXXX); trap '$(SUDO) rm -rf "$$root"' EXIT; \
	echo "make demo-image: debootstrap $(DEMO_SUITE) from $(DEMO_MIRROR) with python3-torch and python3-sklearn into $$root (a few minutes)"; \
	$(SUDO) debootstrap --variant=minbase --components=$(DEMO_COMPONENTS) --include=python3,python3-torch,python3-sklearn $(DEMO_SUITE) "$$root" $(DEMO_MIRROR) && \
	$(SUDO) rm -rf "$$root"/var/cache/apt/archives/*.deb "$$root"/var/lib/apt/lists/* && \
	echo "make demo-image: importing as $(DEMO_IMAGE)" && \
	$(SUDO) tar -C "$$root" -c . | docker import \
		-c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
		-c 'ENV LANG=C.UTF-8' -c 'WORKDIR /niuma/run' \
		-m "niuma digits-mlp demo: Debian $(DEMO_SUITE) + python3-torch + python3-sklearn" - $(DEMO_IMAGE) && \
	echo "make demo-image: $(DEMO_IMAGE) is ready"

# The machine service, for a workstation several users share: one arbiter
# of its GPUs, CPUs and memory that every user's Niuma places its stages
# through (docs/guide/shepherd.md, "One machine, many users"). As root: a
# build without the window in /usr/local/lib/niuma, the settings in
# /etc/niuma/machine.yaml (kept when present), its state in
# /var/lib/niuma, the socket in /run/niuma, and the systemd unit
# niuma-machine, enabled and started. `make uninstall-system` removes the
# service and its socket (users' Niuma then place alone again) and keeps
# the settings and the state.
SYSTEM_LIB  := /usr/local/lib/niuma
SYSTEM_UNIT := /etc/systemd/system/niuma-machine.service

install-system:
	@echo "make install-system: building niuma without the window for the service"
	$(GO) build -tags nowindow -o bin/niuma-system .
	$(SUDO) install -D -m 755 bin/niuma-system $(SYSTEM_LIB)/niuma
	@if [ -e /etc/niuma/machine.yaml ]; then echo "make install-system: keeping /etc/niuma/machine.yaml"; \
	else $(SUDO) install -D -m 644 assets/system/machine.yaml /etc/niuma/machine.yaml && \
		echo "make install-system: wrote /etc/niuma/machine.yaml (no teams yet: one queue for every user; edit it to give teams shares)"; fi
	$(SUDO) install -D -m 644 assets/system/niuma-machine.service $(SYSTEM_UNIT)
	@if [ -d /run/systemd/system ]; then \
		$(SUDO) systemctl daemon-reload && $(SUDO) systemctl enable --now niuma-machine && \
		echo "make install-system: niuma-machine is running; every user's Niuma now places through /run/niuma/niuma.sock (niuma machine shows it)"; \
	else \
		echo "make install-system: systemd is not running here: the unit is installed but not started; start the service with"; \
		echo "  sudo $(SYSTEM_LIB)/niuma serve --system --socket /run/niuma/niuma.sock --config /etc/niuma/machine.yaml --db /var/lib/niuma/machine.db"; \
	fi

uninstall-system:
	@if [ -d /run/systemd/system ]; then $(SUDO) systemctl disable --now niuma-machine 2>/dev/null || true; $(SUDO) systemctl daemon-reload; fi
	$(SUDO) rm -f $(SYSTEM_UNIT) $(SYSTEM_LIB)/niuma /run/niuma/niuma.sock
	@echo "make uninstall-system: removed the machine service and its socket (each user's Niuma places alone again); kept /etc/niuma and /var/lib/niuma"
