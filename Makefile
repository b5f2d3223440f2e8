# gpufleet.sglang — the two commands a user needs:
#   make lab    build the test-host images, bring up the simulated lab (inventories/local),
#               run site.yml on it and print a summary
#   make test   lint, sanity, unit, integration and molecule scenarios (what CI runs)
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

VENV      ?= .venv
PY        := $(VENV)/bin/python
BIN       := $(VENV)/bin
export PATH := $(CURDIR)/$(BIN):$(PATH)
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
export ANSIBLE_FORCE_COLOR ?= 0
# Python keeps the bytecode it compiles (its default): an environment that sets PYTHONDONTWRITEBYTECODE (this
# project's machines do) would have every process compile every module it imports from source, the venvs'
# (installed without bytecode, below) and this collection's plugins alike, in each of make test's ~16,000
# Ansible processes. (.pyc files and __pycache__ are git-ignored, and left out of sanity's tree and of
# ansible-galaxy's builds.)
unexport PYTHONDONTWRITEBYTECODE
export PY_COLORS ?= 0
# machine-level cache (image stamps, SGLang wheels, parser venv): outlives a fresh clone
export GPUFLEET_CACHE ?= $(HOME)/.cache/gpufleet
# real SGLang wheels the tests install (without dependencies) and patch
SGLANG_WHEELS ?= 0.5.8 0.5.12.post1 0.5.13 0.5.14 0.5.23

# molecule scenarios run by `make molecule` (shared config: extensions/molecule/config.yml)
SCENARIOS ?= fleet sglang_gateway sglang_server proxmox_lxc_gpu nvidia_driver nvidia_driver_runfile cuda_toolkit
# scenarios run at once by `make molecule` (each in its own containers)
MOLECULE_JOBS ?= 1
# `make test`: each stage's output goes to $(GPUFLEET_TEST_LOGS)/<stage>.log and is printed as one
# block when the stage ends (tests/harness/stage.sh), so stages that overlap stay readable
export GPUFLEET_TEST_LOGS ?= $(CURDIR)/.cache/test-logs

.PHONY: fuzz-stats help venv harness images wheels lint sanity venv-newest newest integration-newest unit parser-venv integration molecule test lab lab-newest lab-down clean docs changelog changelog-release changelog-lint role-docs role-docs-write promtool

help:
	@echo "make lab      simulated lab: images, hosts, site.yml, summary"
	@echo "make test     everything CI runs (lint, sanity, unit, integration, molecule)"
	@echo "make lint | sanity | unit | integration | molecule [SCENARIOS='...'] | lab-down"
	@echo "make lab-newest   site.yml on the running lab with the newest supported toolchain (.venv-newest)"
	@echo "make newest   unit suite and sanity on the newest supported toolchain (.venv-newest, Python 3.13)"
	@echo "make integration-newest   the integration suite on it (a stage of make test)"
	@echo "make docs     HTML docs site (antsibull-docs + Sphinx, warnings are errors) in .cache/docs/html"
	@echo "make changelog | changelog-release   render CHANGELOG.md | fold changelogs/fragments into it"

# uv installs the venvs' pins (the same files pip would read). It does not compile them to bytecode
# (no --compile-bytecode): Python compiles a module when a process first imports it and keeps the .pyc
# in the venv, so only what the tools import is compiled, once. On a warm cache uv installs the dev venv
# in about 2 s and 2 CPU s, against 35 s and 40 CPU s compiling every file of every package (2026-12-07),
# and a fresh clone's make test builds two venvs. uv lives in the
# machine-level cache, so a fresh clone does not install it again. Its version is the one the sglang
# role installs on the nodes (sglang_uv_version in its defaults, read as lab.sh and the fleet read it).
UV_VERSION ?= $(shell sed -n 's/^sglang_uv_version: "\(.*\)"$$/\1/p' roles/sglang/defaults/main.yml)
UV_DIR    := $(GPUFLEET_CACHE)/uv-$(UV_VERSION)
UV        := $(UV_DIR)/bin/uv
$(UV):
	@[[ -n "$(UV_VERSION)" ]] || { echo "make: no uv version: sglang_uv_version not found in roles/sglang/defaults/main.yml (or pass UV_VERSION=...)" >&2; exit 1; }
	python3 -m venv $(UV_DIR)
	$(UV_DIR)/bin/pip install -q uv==$(UV_VERSION)

$(VENV)/.stamp: requirements.txt requirements-dev.txt | $(UV)
	python3 -m venv $(VENV)
	$(UV) pip install -q --python $(PY) --upgrade-package pip pip -r requirements-dev.txt
	touch $@

venv: $(VENV)/.stamp

# --- the newest supported toolchain (docs/supported-versions.md): Python 3.13, requirements-newest.txt's
# ansible-core and ansible, every other pin as in requirements.txt and requirements-dev.txt
NEWEST_VENV ?= .venv-newest
PYTHON_NEWEST ?= $(firstword $(wildcard $(HOME)/.pyenv/versions/3.13.*/bin/python3) $(shell command -v python3.13 2>/dev/null))
$(NEWEST_VENV)/.stamp: requirements.txt requirements-dev.txt requirements-newest.txt | $(UV)
	@[[ -n "$(PYTHON_NEWEST)" ]] || { echo "make venv-newest: no Python 3.13 found (looked for $(HOME)/.pyenv/versions/3.13.*/bin/python3 and python3.13 on PATH): install one (pyenv install 3.13) or pass PYTHON_NEWEST=/path/to/python3.13" >&2; exit 1; }
	$(PYTHON_NEWEST) -m venv $(NEWEST_VENV)
	sed -E '/^(ansible|ansible-core)==/d; /^-r /d' requirements.txt requirements-dev.txt > $(NEWEST_VENV)/shared-pins.txt
	$(UV) pip install -q --python $(NEWEST_VENV)/bin/python --upgrade-package pip pip -r requirements-newest.txt -r $(NEWEST_VENV)/shared-pins.txt
	touch $@

venv-newest: $(NEWEST_VENV)/.stamp

# the unit suite and ansible-test sanity on the newest toolchain (in the host's .venv-newest, not in
# the debian13 test image: that image carries no pip or venv). The stage `newest` of make test runs it.
# The unit suite runs here under the hypothesis profile `matrix` (tests/unit/conftest.py: the settings
# of `ci`, 20 examples per property-based test instead of 200): the fuzz depth is had once, on the
# base toolchain (`make unit`); this run checks that the code and the tests work on the newest one.
# The tests marked parser_venv are left out: they run SGLang's own parser in its CPU venv, whose
# Python is the same on both toolchains, so they would only repeat the base run.
newest: venv-newest wheels
	HYPOTHESIS_PROFILE=matrix PATH=$(CURDIR)/$(NEWEST_VENV)/bin:$$PATH $(NEWEST_VENV)/bin/pytest -q -m "not parser_venv" tests/unit
	PATH=$(CURDIR)/$(NEWEST_VENV)/bin:$$PATH bash tests/harness/sanity.sh

# the integration suite on the newest toolchain (the stage integration-newest of make test; about as much
# CPU as the stage integration-other).
# test_sglang_role.py is left out: its nodes are this machine with the controller's Python (3.13 here),
# and the real SGLang wheels from 0.5.12 on are cp311 builds, made for the Debian 12 nodes' Python.
integration-newest: venv-newest images wheels
	PATH=$(CURDIR)/$(NEWEST_VENV)/bin:$$PATH $(NEWEST_VENV)/bin/pytest -q tests/integration --ignore=tests/integration/test_sglang_role.py

# build context of the execution environment for AWX/AAP (execution-environment.yml)
.PHONY: ee
ee: venv
	rm -rf .cache/ee
	$(BIN)/ansible-builder create -f execution-environment.yml -c .cache/ee

harness:
	bash tests/harness/setup-host.sh

images: harness
	bash tests/harness/build-image.sh debian12
	bash tests/harness/build-image.sh debian13

wheels: venv
	@mkdir -p $(GPUFLEET_CACHE)/wheels
	@for v in $(SGLANG_WHEELS); do \
	  ls $(GPUFLEET_CACHE)/wheels/sglang-$$v-*.whl >/dev/null 2>&1 || { \
	    echo "downloading sglang==$$v (no dependencies)"; \
	    $(BIN)/pip download -q --no-deps --only-binary=:all: -d $(GPUFLEET_CACHE)/wheels sglang==$$v; }; \
	done

lint: venv
	$(BIN)/yamllint -s .
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/ansible-lint --profile production
	$(MAKE) --no-print-directory changelog-lint role-docs promtool

# the fleet_monitoring role's files rendered for a three-node fleet (tests/promtool/render.yml, each
# checked by promtool/amtool as it is written), `promtool check config` on them, and the rules' unit
# tests. promtool and amtool: Debian's prometheus and prometheus-alertmanager (make harness).
promtool: venv harness
	@command -v promtool >/dev/null && command -v amtool >/dev/null || { echo "promtool/amtool missing: install Debian's prometheus and prometheus-alertmanager packages (make harness)" >&2; exit 1; }
	$(BIN)/ansible-playbook -i tests/promtool/inventory.yml tests/promtool/render.yml
	promtool check config .cache/promtool/prometheus.yml
	promtool test rules tests/promtool/*_test.yml

# --- changelog: antsibull-changelog, one fragment per change in changelogs/fragments/ -----------
# (docs/CONTRIBUTING.md). CHANGELOG.md is generated: never edited by hand.
changelog: venv
	$(BIN)/antsibull-changelog generate

# release manager: fold the fragments into changelogs/changelog.yaml under galaxy.yml's version
# (while that version is unreleased, into its existing entry) and render CHANGELOG.md
changelog-release: venv
	$(BIN)/antsibull-changelog release --update-existing

changelog-lint: venv
	$(BIN)/antsibull-changelog lint
	$(BIN)/antsibull-changelog lint-changelog-yaml changelogs/changelog.yaml
	@tmp=$$(mktemp); trap 'rm -f "$$tmp"' EXIT; \
	$(BIN)/antsibull-changelog generate --output "$$tmp" --output-format md; \
	diff -u CHANGELOG.md "$$tmp" >&2 || { echo "CHANGELOG.md differs from changelogs/changelog.yaml: it is generated, run 'make changelog' (entries go into changelogs/fragments/)" >&2; exit 1; }

# defaults/main.yml, meta/argument_specs.yml and README.md of every role agree (tools/role_docs):
# the README variable tables are what role-docs-write generates from the specs, shown as a diff
role-docs: venv
	$(PY) tools/role_docs/role_docs.py check

# rewrite every role README's variable tables from its meta/argument_specs.yml
role-docs-write: venv
	$(PY) tools/role_docs/role_docs.py write

# --- docs: HTML site with antsibull-docs and Sphinx, warnings are errors (tools/docsite/build.sh)
docs: venv
	bash tools/docsite/build.sh

sanity: venv
	bash tests/harness/sanity.sh

unit: venv wheels parser-venv
	$(BIN)/pytest -q tests/unit

# CPU-only venv with SGLang 0.5.23's own parser, for the unit tests (cached in GPUFLEET_CACHE; ~1 min
# once per machine)
parser-venv: venv wheels
	bash tests/harness/sglang-parser-venv.sh >/dev/null

integration: venv images wheels
	$(BIN)/pytest -q tests/integration

# MOLECULE_JOBS scenarios at a time; every scenario runs even when another fails, and make fails
# if any did (xargs exits 123)
molecule: venv images
	@printf '%s\n' $(SCENARIOS) | xargs -P $(MOLECULE_JOBS) -I{} bash -c \
	  'echo "=== molecule test -s $$0"; start=$$SECONDS; \
	   $(BIN)/molecule test -s $$0 && echo "=== $$0 passed in $$((SECONDS - start)) s"' {}

# Every stage in one pool of TEST_JOBS stages at a time, longest first, so that a worker that
# finishes takes the next stage: the molecule scenarios, lint (yamllint, ruff, ansible-lint, the
# changelog, role docs and promtool checks: a stage like the others since lint alone before the
# pool used one core for about a minute and a half while the other idled), the integration tests
# (in two stages: the sglang role's real-wheel installs, and the rest), the unit tests and
# ansible-test sanity, and on the newest ansible-core and ansible (.venv-newest, Python 3.13;
# docs/supported-versions.md) the unit tests and sanity (`newest`) and the integration tests but the
# sglang role's (`integration-newest`). Unit and sanity use about one core each; run alone before
# the pool (as they did) they left the second core idle for ~15 min. The venvs are built before the
# pool (two stages use .venv-newest).
# The critical path (TEST_CRITICAL, the fleet scenario: mostly waits on its servers, and the longest
# stage) runs at normal priority, every other stage at niceness TEST_NICE: when both want the CPU,
# the critical path gets it and the others fill the rest, instead of stretching the longest stage.
# Each stage prints its wall and CPU time and when it started and ended on the pool's clock
# (tests/harness/stage.sh); the end prints the whole run's wall time and how busy the machine was
# (from /proc/stat), also when a stage failed.
# Every stage runs even when another fails; make fails if any did (xargs exits 123).
TEST_STAGES ?= fleet integration-other integration-newest integration-sglang-role sglang_server newest nvidia_driver unit lint sglang_gateway sanity proxmox_lxc_gpu nvidia_driver_runfile cuda_toolkit
TEST_JOBS ?= 3
TEST_CRITICAL ?= fleet
TEST_NICE ?= 5
test: venv venv-newest harness images wheels parser-venv
	@rm -f "$(GPUFLEET_TEST_LOGS)/.failed"; \
	cpu0=$$(awk '/^cpu / {print $$2+$$3+$$4+$$7+$$8, $$5+$$6}' /proc/stat); t0=$$SECONDS; rc=0; \
	export STAGE_T0=$$(date +%s); \
	printf '%s\n' $(TEST_STAGES) | xargs -P $(TEST_JOBS) -I{} bash -c \
	  'case $$0 in \
	     unit) set -- $(BIN)/pytest -q --durations=40 tests/unit ;; \
	     sanity) set -- bash tests/harness/sanity.sh ;; \
	     integration-sglang-role) set -- $(BIN)/pytest -q --durations=40 tests/integration/test_sglang_role.py ;; \
	     integration-other) set -- $(BIN)/pytest -q --durations=40 tests/integration --ignore=tests/integration/test_sglang_role.py ;; \
	     newest) set -- $(MAKE) --no-print-directory newest ;; \
	     integration-newest) set -- $(MAKE) --no-print-directory integration-newest ;; \
	     lint) set -- $(MAKE) --no-print-directory lint ;; \
	     *) name=molecule-$$0; set -- $(BIN)/molecule test -s $$0 ;; esac; \
	   case " $(TEST_CRITICAL) " in *" $$0 "*) nice_level=0 ;; *) nice_level=$(TEST_NICE) ;; esac; \
	   STAGE_NICE=$$nice_level exec bash tests/harness/stage.sh "$${name:-$$0}" "$$@"' {} || rc=$$?; \
	cpu1=$$(awk '/^cpu / {print $$2+$$3+$$4+$$7+$$8, $$5+$$6}' /proc/stat); \
	echo "$$cpu0 $$cpu1 $$((SECONDS - t0)) $$(getconf CLK_TCK) $$(nproc) $$rc" | awk '{busy = ($$3 - $$1) / $$6; idle = ($$4 - $$2) / $$6; \
	  printf "make test: %s in %d s; the machine (%d cores) was busy %.0f%% of that time (%.0f CPU s)\n", \
	    ($$8 == 0 ? "all stages passed" : "a stage FAILED (named below)"), $$5, $$7, 100 * busy / (busy + idle), busy}'; \
	bash tests/harness/stage.sh --report; \
	exit $$rc

# make lab LAB_PVE_RELEASE=debian13: lab-pve1 on Debian 13 (Proxmox VE 9) instead of Debian 12
# (Proxmox VE 8; tests/harness/lab.sh); a lab that runs the other one is refused (make lab-down first)
lab: venv images
	bash tests/harness/lab.sh up
	bash tests/harness/lab.sh converge

# site.yml on the running lab (make lab first) with the newest supported toolchain (.venv-newest:
# Python 3.13, the newest ansible-core and ansible with community.proxmox 2.x)
lab-newest: venv-newest
	LAB_VENV=$(CURDIR)/$(NEWEST_VENV) bash tests/harness/lab.sh converge

lab-down:
	bash tests/harness/lab.sh down

clean: lab-down
	rm -rf $(VENV) $(NEWEST_VENV) .cache tests/output

# the fuzz suite's size: generated cases per property-based test and in all (tests/unit/conftest.py)
fuzz-stats: venv
	$(BIN)/pytest -q tests/unit -p no:randomly --hypothesis-show-statistics 2>&1 \
	  | awk '/^tests\/unit\/.*::.*:$$/ {t=$$1} / - [0-9]+ passing, [0-9]+ failing/ {n+=$$2; c++; printf "%6d  %s\n", $$2, t} \
	         END {printf "%d property-based tests, %d generated cases\n", c, n}'
