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
export PY_COLORS ?= 0

# molecule scenarios run by `make test`, in order
SCENARIOS ?= nvidia_driver_invalid nvidia_driver cuda_toolkit

.PHONY: help venv harness images lint sanity unit integration molecule test lab lab-down clean

help:
	@echo "make lab      simulated lab: images, hosts, site.yml, summary"
	@echo "make test     everything CI runs (lint, sanity, unit, integration, molecule)"
	@echo "make lint | sanity | unit | integration | molecule [SCENARIOS='...'] | lab-down"

$(VENV)/.stamp: requirements.txt
	python3 -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -r requirements.txt
	touch $@

venv: $(VENV)/.stamp

harness:
	bash tests/harness/setup-host.sh

images: harness
	bash tests/harness/build-image.sh debian12
	bash tests/harness/build-image.sh debian13

lint: venv
	$(BIN)/yamllint -s .
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/ansible-lint --profile production

sanity: venv
	bash tests/harness/sanity.sh

unit: venv
	$(BIN)/pytest -q tests/unit

integration: venv harness
	$(BIN)/pytest -q tests/integration

molecule: venv images
	@for s in $(SCENARIOS); do \
	  echo "=== molecule test -s $$s"; start=$$SECONDS; \
	  $(BIN)/molecule test -s $$s || exit 1; \
	  echo "=== $$s passed in $$((SECONDS - start)) s"; \
	done

test: lint sanity unit integration molecule
	@echo "make test: all stages passed"

lab: venv images
	bash tests/harness/lab.sh up
	bash tests/harness/lab.sh converge

lab-down:
	bash tests/harness/lab.sh down

clean: lab-down
	rm -rf $(VENV) .cache tests/output
