# cvs.cluster — developer and demo entry points. Run as root for the cluster targets.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
NODES ?= 3
INVENTORY ?= tests/cluster/generated/inventory-container.yml
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg

.PHONY: setup system-deps cluster-up cluster-down demo test unit units lint sanity integration bench clean

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

## demo: the main job (validate.yml) on the simulated cluster
demo: cluster-up
	$(VENV)/bin/ansible-playbook -i $(INVENTORY) playbooks/validate.yml

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

clean: cluster-down
	rm -rf $(VENV) .cache tests/output
