# cvs.cluster — developer and demo entry points. Run as root for the cluster targets.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
NODES ?= 3
# make demo's inventory: the container backend with the image that carries real MaxText (tests/cluster/maxtext)
INVENTORY ?= tests/cluster/generated/inventory-demo.yml
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg

.PHONY: setup system-deps cluster-up cluster-down demo test unit units lint sanity integration bench clean \
	core2.21-setup core2.21 core2.21-integration ee

## setup: virtualenv with Python deps and the collections (idempotent)
setup: $(VENV)/.installed .cache/collections/.installed

$(VENV)/.installed: requirements.txt constraints.txt
	@test -x $(PY) || python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q --disable-pip-version-check -r requirements.txt -c constraints.txt
	@touch $@

.cache/collections/.installed: requirements.yml scripts/install_collections.py $(VENV)/.installed
	$(PY) scripts/install_collections.py

## system-deps: Debian packages the simulated cluster needs (root)
system-deps:
	bash scripts/system-deps.sh

## cluster-up / cluster-down: the simulated N-node cluster (root)
cluster-up: system-deps setup
	NODES=$(NODES) bash tests/cluster/up.sh

cluster-down:
	bash tests/cluster/down.sh

## demo: the main job (validate.yml) on the simulated cluster: preflight, RVS (GPU stand-ins), real MaxText on CPU
demo: cluster-up
	$(VENV)/bin/ansible-playbook -i $(INVENTORY) playbooks/validate.yml -e @tests/cluster/maxtext/cpu.yml

## test: setup, unit tests, linters, sanity, integration on a fresh cluster, teardown
test: system-deps setup
	NODES=$(NODES) bash scripts/test.sh

unit: setup
	$(PY) -m pytest tests/unit -q -p no:cacheprovider

## units: the same unit tests under ansible-test units (collection loader, pytest-xdist)
units: setup
	bash scripts/units.sh

lint: setup
	bash scripts/lint.sh

sanity: setup
	bash scripts/sanity.sh

integration: setup
	$(PY) -m pytest tests/integration -q -p no:cacheprovider

bench: setup
	$(PY) bench/run_all.py

## core2.21-setup: the second controller line, ansible-core 2.21 on Python 3.13 (.cache/venv-core2.21, idempotent)
## core2.21: its unit tests (pytest and ansible-test units), sanity and the local integration tests
## core2.21-integration: its validate.yml runs and ansible-runner pipeline on the running simulated cluster
LINE := bash scripts/controller_line.sh

core2.21-setup:
	$(LINE) setup

core2.21: core2.21-setup
	$(LINE) unit
	$(LINE) units
	$(LINE) sanity
	$(LINE) local

core2.21-integration: core2.21-setup
	$(LINE) integration

## ee: the execution environment of execution-environment.yml with the host's docker, offline (scripts/ee_build.sh:
## Debian trixie base by mmdebstrap, wheels from the host; reused while its inputs are unchanged)
ee: setup
	bash scripts/ee_build.sh

clean: cluster-down
	rm -rf $(VENV) .cache tests/output
