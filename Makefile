# lakeloader: `make demo` and `make test` set everything up themselves on a fresh machine
# (Python 3.11+, Java 17, Node 18+; PyPI and npm reachable).

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.lakeloader-installed
STAGE  ?= dev
export JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION := 1
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export SPARK_LOCAL_IP := 127.0.0.1

.PHONY: setup test lint unit spark infra e2e demo demo-local synth clean

setup: $(STAMP)

$(STAMP): requirements.txt requirements-dev.txt pyproject.toml package.json package-lock.json
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	$(PY) -m pip install --quiet --no-deps -e .
	npm ci --no-audit --no-fund --loglevel=error
	$(PY) -m lakeloader_dev.jars > /dev/null
	touch $(STAMP)

lint: $(STAMP)
	$(PY) -m ruff check .

test: lint
	$(PY) -m pytest tests

unit: $(STAMP)
	$(PY) -m pytest tests/unit
spark: $(STAMP)
	$(PY) -m pytest tests/spark
infra: $(STAMP)
	$(PY) -m pytest tests/infra
e2e: $(STAMP)
	$(PY) -m pytest tests/e2e

# the real loop on the embedded AWS emulator: deploy, land examples/raw, Lambda-triggered Glue runs
demo: $(STAMP)
	$(PY) -m lakeloader_dev.demo

demo-local: $(STAMP)
	$(PY) -m lakeloader_dev.demo --local

synth: $(STAMP)
	./node_modules/.bin/cdk synth -c stage=$(STAGE) --quiet

clean:
	rm -rf $(VENV) node_modules cdk.out build/cdk-assets .lakeloader
