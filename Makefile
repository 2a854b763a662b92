# lakeloader: `make demo` and `make test` set everything up themselves on a fresh machine
# (Python 3.11, Java 17, Node 18+; PyPI, npm and Maven Central reachable).

# The runtime the laptop runs (lakeloader/runtimes.py): its Python picks its Spark (requirements.txt),
# and it has a virtualenv of its own. `make test RUNTIME=glue-6.0` needs Python 3.13.
RUNTIME ?= glue-5.1
RUNTIME_PYTHON_glue-5.1 := 3.11
RUNTIME_PYTHON_glue-6.0 := 3.13
RUNTIME_PYTHON := $(RUNTIME_PYTHON_$(RUNTIME))
ifeq ($(RUNTIME_PYTHON),)
$(error RUNTIME=$(RUNTIME) is not a runtime lakeloader runs on: glue-5.1 or glue-6.0)
endif
# The runtime's interpreter: pythonX.Y on the PATH, else pyenv's; glue-5.1 also takes plain python3.
PYTHON_CANDIDATES := python$(RUNTIME_PYTHON) $(wildcard $(HOME)/.pyenv/versions/$(RUNTIME_PYTHON).*/bin/python$(RUNTIME_PYTHON)) \
                     $(if $(filter glue-5.1,$(RUNTIME)),python3)
PYTHON ?= $(firstword $(foreach p,$(PYTHON_CANDIDATES),$(if $(shell $(p) -V 2>/dev/null),$(p))))
PYTHON := $(PYTHON)
ifeq ($(PYTHON),)
$(error RUNTIME=$(RUNTIME) needs Python $(RUNTIME_PYTHON): install it (e.g. pyenv install $(RUNTIME_PYTHON)) or pass PYTHON=/path/to/python$(RUNTIME_PYTHON))
endif
VENV   := $(if $(filter glue-5.1,$(RUNTIME)),.venv,.venv-$(RUNTIME))
export LAKELOADER_RUNTIME := $(RUNTIME)
SCAN_VENV := .venv-scan
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.lakeloader-installed
STAGE  ?= dev
export JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION := 1
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export SPARK_LOCAL_IP := 127.0.0.1
# Every set-up step says how long it took (bash's `time`), so a slow CI log shows where set-up went.
SHELL := /bin/bash
export TIMEFORMAT := set-up step took %1R s (%1U s user, %1S s system)

.PHONY: setup test check lint unit spark infra e2e faults demo demo-local synth clean mutate bench-quick

setup: $(STAMP)

$(STAMP): requirements.txt requirements-dev.txt requirements-job.txt requirements-lambda.txt requirements-scan.txt pyproject.toml package.json package-lock.json
	time (test -x $(PY) || $(PYTHON) -m venv $(VENV))
	time $(PY) -m pip install --quiet --upgrade pip
	time $(PY) -m pip install --quiet -r requirements-dev.txt
	time $(PY) -m pip install --quiet --no-deps -e .
	time npm ci --no-audit --no-fund --loglevel=error
	time (test -x $(SCAN_VENV)/bin/python || $(PYTHON) -m venv $(SCAN_VENV))
	time $(SCAN_VENV)/bin/python -m pip install --quiet -r requirements-scan.txt  # checkov, beside cdk-nag
	time $(PY) -m lakeloader_dev.jars > /dev/null  # the runtime's Iceberg and AWS jars from Maven Central
	time $(PY) -m infra.prefetch > /dev/null  # the jobs' and the Lambdas' wheels (requirements-job/-lambda.txt) into .lakeloader/wheels
	time $(PY) -m lakeloader_dev.jvm > /dev/null  # class-data archive: the emulator's and tests' short Spark JVMs start cheaper
	touch $(STAMP)

lint: $(STAMP)
	$(PY) -m ruff check .

# What `make test` runs: every test on the default runtime; on glue-6.0 the unit and Spark engine
# suites and one S3 -> Lambda -> Glue run end to end (the layers above Spark are the same code).
TESTS_glue-5.1 := tests
TESTS_glue-6.0 := tests/unit tests/spark \
                  tests/e2e/test_s3_to_iceberg.py::test_cdc_batches_are_merged \
                  tests/e2e/test_s3_to_iceberg.py::test_an_outside_reader_reads_the_tables_spark_wrote_through_the_glue_catalog

# The machine and its load first: the per-module lines and durations that follow are read against it.
test: lint
	@echo "make test ($(RUNTIME)): $$(nproc) cores, $$(free -g | awk '/^Mem/ {print $$2}') GiB, load $$(cut -d' ' -f1-3 /proc/loadavg)"
	$(PY) -m pytest $(TESTS_$(RUNTIME))

# The inner loop, a few minutes: lint, the unit tests, the infra assertions that need no synth and
# the Spark tests not marked `slow` (pyproject.toml's markers). `make test` runs every test.
check: lint
	$(PY) -m pytest tests/unit tests/infra tests/spark -m "not slow and not synth"

unit: $(STAMP)
	$(PY) -m pytest tests/unit
spark: $(STAMP)
	$(PY) -m pytest tests/spark
infra: $(STAMP)
	$(PY) -m pytest tests/infra
e2e: $(STAMP)
	$(PY) -m pytest tests/e2e
# crashes, concurrent writers, disorder and duplicate triggers against an oracle; prints the figures
faults: $(STAMP)
	$(PY) -m pytest tests/faults

# the real loop on the embedded AWS emulator: deploy, land examples/raw, Lambda-triggered Glue runs
demo: $(STAMP)
	$(PY) -m lakeloader_dev.demo

demo-local: $(STAMP)
	$(PY) -m lakeloader_dev.demo --local

synth: $(STAMP)
	./node_modules/.bin/cdk synth -c stage=$(STAGE) --quiet

# Mutation testing (not part of `make test`): mutmut mutates the modules whose tests need no JVM (the
# Spark-free halves of maintenance and the Iceberg layer: retention, table_state, object_versions) and
# runs their unit tests against each mutant, in a copy under build/mutate (the work tree is never
# touched); it prints the score and the surviving mutants (`mutmut show <name>` in build/mutate
# shows one). Narrow it with e.g. `make mutate MUTATE_MODULES="trigger ledger"`.
MUTATE_MODULES ?= trigger ledger config schema inputs retention table_state object_versions
MUTATE_TESTS   ?= $(wildcard tests/unit/test_trigger_*.py) tests/unit/test_ledger.py tests/unit/test_drain.py \
                  tests/unit/test_config.py tests/unit/test_scd2_config.py tests/unit/test_config_store.py \
                  tests/unit/test_schema_plan.py tests/unit/test_retention_cutoffs.py \
                  tests/unit/test_table_state.py tests/unit/test_object_versions.py
# The score per module, as mutmut's badge counts it: (killed + timeout) / (all checked but skipped).
define MUTATION_SCORE_PY
import collections, json, pathlib
from mutmut.stats import status_by_exit_code as status
print("module      killed timeout survived no-tests  score")
for meta in sorted(pathlib.Path("mutants/lakeloader").rglob("*.py.meta")):
    n = collections.Counter(status[code] for code in json.loads(meta.read_text())["exit_code_by_key"].values())
    caught, checked = n["killed"] + n["timeout"], n["killed"] + n["timeout"] + n["survived"] + n["no tests"]
    score = f"{100 * caught / checked:5.1f}%" if checked else "    -"
    print(f"{meta.relative_to('mutants/lakeloader').as_posix()[:-8]:10} {n['killed']:7} {n['timeout']:7} {n['survived']:8} {n['no tests']:8}  {score}"
          + (f"  ({n['not checked']} not checked)" if n["not checked"] else ""))
endef
export MUTATION_SCORE_PY
MUTMUT := mutmut==3.8.1
comma := ,
mutate: $(STAMP)
	$(PY) -m pip install --quiet $(MUTMUT)
	rm -rf build/mutate && mkdir -p build/mutate
	cp -r lakeloader tests config examples lambda pyproject.toml build/mutate/
	printf '\n[tool.mutmut]\nsource_paths = ["lakeloader"]\nalso_copy = ["config", "examples", "lambda"]\nonly_mutate = [%s]\npytest_add_cli_args = ["-p", "no:cacheprovider"]\npytest_add_cli_args_test_selection = [%s]\n' \
	  '$(foreach m,$(MUTATE_MODULES),"lakeloader/$(m).py"$(comma) "lakeloader/$(m)/*"$(comma))' \
	  '$(subst " ","$(comma) ",$(patsubst %,"%",$(MUTATE_TESTS)))' >> build/mutate/pyproject.toml
	cd build/mutate && $(abspath $(VENV))/bin/mutmut run --max-children 2 > mutmut-run.log 2>&1 || { tail -30 mutmut-run.log; exit 1; }
	cd build/mutate && $(abspath $(VENV))/bin/mutmut results; $(abspath $(PY)) -c "$$MUTATION_SCORE_PY"

clean:
	rm -rf $(VENV) $(SCAN_VENV) node_modules cdk.out build/cdk-assets .lakeloader
