# lakeloader: `make demo` and `make test` set everything up themselves on a fresh machine
# (Python 3.11, Java 17, Node 22 or 24 -- Node 20 works, with jsii's end-of-life warning; PyPI, npm and
# Maven Central reachable). The scanners' venv (checkov) is set up only by the targets that run it.

# The runtime the laptop runs (lakeloader/control/runtimes.py): its Python and constraints/<runtime>.txt pick its
# Spark (requirements.txt), and it has a virtualenv of its own. `make test RUNTIME=glue-6.0` needs Python
# 3.13; so does RUNTIME=glue-6.1, whose Glue runs 3.14, which these machines cannot install (its suites
# run on 3.13 with Glue 6.1's Spark; docs/deploy.md, "Runtimes").
RUNTIME ?= glue-5.1
RUNTIME_PYTHON_glue-5.1 := 3.11
RUNTIME_PYTHON_glue-6.0 := 3.13
RUNTIME_PYTHON_glue-6.1 := 3.13
RUNTIME_PYTHON := $(RUNTIME_PYTHON_$(RUNTIME))
ifeq ($(RUNTIME_PYTHON),)
$(error RUNTIME=$(RUNTIME) is not a runtime lakeloader runs on: glue-5.1, glue-6.0 or glue-6.1)
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
SCAN_STAMP := $(SCAN_VENV)/.lakeloader-installed
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.lakeloader-installed
STAGE  ?= dev
export JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION := 1
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export SPARK_LOCAL_IP := 127.0.0.1
# Every set-up step says how long it took (bash's `time`), so a slow CI log shows where set-up went.
SHELL := /bin/bash
export TIMEFORMAT := set-up step took %1R s (%1U s user, %1S s system)

.PHONY: setup scan-setup test check lint docs unit spark infra e2e faults demo demo-local synth clean mutate bench-quick

setup: $(STAMP)

# checkov (tests/infra/test_infra_checkov.py), in a venv of its own: its pins conflict with the dev
# venv's. `make test`, `check` and `infra` set it up; `make demo` never needs it.
scan-setup: $(SCAN_STAMP)

$(SCAN_STAMP): requirements-scan.txt
	time (test -x $(SCAN_VENV)/bin/python || $(PYTHON) -m venv $(SCAN_VENV))
	time $(SCAN_VENV)/bin/python -m pip install --quiet -r requirements-scan.txt  # checkov, beside cdk-nag
	touch $(SCAN_STAMP)

$(STAMP): requirements.txt requirements-dev.txt requirements-job.txt requirements-lambda.txt constraints/$(RUNTIME).txt pyproject.toml package.json package-lock.json
	time (test -x $(PY) || $(PYTHON) -m venv $(VENV))
	time $(PY) -m pip install --quiet --upgrade pip
	time $(PY) -m pip install --quiet -r requirements-dev.txt -c constraints/$(RUNTIME).txt
	time $(PY) -m pip install --quiet --no-deps -e .
	time npm ci --no-audit --no-fund --loglevel=error
	time $(PY) -m lakeloader_dev.jars > /dev/null  # the runtime's Iceberg and AWS jars from Maven Central
	time $(PY) -m infra.prefetch > /dev/null  # the jobs' and the Lambdas' wheels (requirements-job/-lambda.txt) into .lakeloader/wheels
	time $(PY) -m lakeloader_dev.jvm > /dev/null  # class-data archive: the emulator's and tests' short Spark JVMs start cheaper
	touch $(STAMP)

lint: $(STAMP)
	$(PY) -m ruff check .

# The docs site (mkdocs.yml: docs/ with the configuration and CLI references generated from the code) into
# build/site, strict: a broken link or anchor, or a page left out of the navigation, fails (not with
# --quiet: it hides the warnings strict mode counts). A few seconds.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --site-dir build/site

# What `make test` runs: every test on the default runtime; on glue-6.0 and glue-6.1 the unit and Spark
# engine suites and one S3 -> Lambda -> Glue run end to end (the layers above Spark are the same code).
TESTS_glue-5.1 := tests
TESTS_glue-6.0 := tests/unit tests/spark tests/e2e/test_emulator_drivers.py \
                  tests/e2e/test_s3_to_iceberg.py::test_cdc_batches_are_merged \
                  tests/e2e/test_s3_to_iceberg.py::test_an_outside_reader_reads_the_tables_spark_wrote_through_the_glue_catalog
TESTS_glue-6.1 := $(TESTS_glue-6.0)

# How fast one core of this machine is: one commit's unit suite took 72 s on 2026-11-28 (beside a
# lowest-priority mutation run) and 173 s on 2026-11-29 (quiet), on the same kind of 2-core machine;
# a slow log should say whether the machine was slow.
define CPU_PROBE_PY
import time
start, total = time.perf_counter(), 0
for step in range(10_000_000):
    total += step * step
print(f"{time.perf_counter() - start:.1f}")
endef
export CPU_PROBE_PY
# The machine, its load and free disk first: the per-module lines and durations are read against it.
# Then the suite in two lanes (tests/lanes.py), one pytest-xdist worker each: spark and faults in one (but two Spark modules),
# e2e, infra and unit in the other; no suite alone keeps two cores busy.
test: lint docs $(SCAN_STAMP)
	@echo "make test ($(RUNTIME)): $$(nproc) cores, $$(free -g | awk '/^Mem/ {print $$2}') GiB, load $$(cut -d' ' -f1-3 /proc/loadavg)," \
	  "$$(df -h --output=avail "$${TMPDIR:-/tmp}" | tail -1 | tr -d ' ') free for temporary files (a run peaks near 2 GB there)," \
	  "one core's speed: $$($(PY) -c "$$CPU_PROBE_PY") s for 10M steps of a Python loop"
	$(PY) -m pytest $(TESTS_$(RUNTIME)) -n 2 --dist loadgroup

# The inner loop, a few minutes: lint, the unit tests, the infra assertions that need no synth and
# the Spark tests not marked `slow` (pyproject.toml's markers), in `make test`'s two lanes. `make test`
# runs every test.
check: lint $(SCAN_STAMP)
	$(PY) -m pytest tests/unit tests/infra tests/spark -m "not slow and not synth" -n 2 --dist loadgroup

unit: $(STAMP)
	$(PY) -m pytest tests/unit
spark: $(STAMP)
	$(PY) -m pytest tests/spark
infra: $(STAMP) $(SCAN_STAMP)
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

# The merge benchmark's quick cases, each beside the AWS two-MERGE pattern (benchmarks/RESULTS.md), on
# the runtime RUNTIME names; a few minutes, not part of `make test`.
bench-quick: $(STAMP)
	$(PY) -m benchmarks.merge --quick

# Mutation testing (not part of `make test`): mutmut mutates the modules whose tests need no JVM -- the
# ledger, the trigger, the operator verbs (cli/operate, stage, cli/stage_verbs), config, formats (its Spark-free
# functions: MUTATE_SPARK_ONLY lists the ones only tests/spark reaches, left out of the score), schema's
# planning and the Spark-free halves of maintenance and the Iceberg layer, the Spark-free parts of the snapshot
# diff, reconcile and its repair, the unreadable-file finder and the load job, reconciliation, verify and its
# canary cleanup, reader grants, maintain's plan and what it leaves to and sets in S3 Tables (jobs/maintenance
# and iceberg/s3_tables, their Spark-free functions) -- against their unit tests, and infra's network, readers
# (and S3 Tables readers), encryption constructs (storage: the key and what it encrypts), writers and S3 Tables
# table bucket against the infra assertions (writers and the table bucket against their construct-alone
# tests, test_infra_*_alone: the same rules as their synth tests, without a stage's synth per mutant).
# Each half runs in a copy (MUTATE_DIR/lakeloader, MUTATE_DIR/infra; the work tree is
# never touched) and prints the score per module, then the surviving mutants (`mutmut show <name>` in that
# copy shows one). Narrow it with e.g. `make mutate MUTATE_MODULES="cli/operate cli/stage"` or
# `MUTATE_MODULES=infra/network`; two runs at once need two MUTATE_DIRs (and MUTATE_CHILDREN=1 each on a 2-core machine). A stopped run goes on where it
# stopped with MUTATE_RESUME=1 and the same MUTATE_MODULES and MUTATE_DIR: its copy is kept, with the code
# and tests it was made from, and mutmut leaves each verdict it recorded (an infra module runs for hours).
MUTATE_MODULES ?= control/trigger control/ledger cli/operate cli/stage cli/stage_verbs config formats engine/schema spark/inputs jobs/retention iceberg/table_state \
                  jobs/object_versions engine/full_copy engine/reconciliation engine/repair cli/verify cli/canary_cleanup control/reader_grants \
                  engine/unreadable jobs/load infra/network infra/readers infra/s3_tables_readers infra/storage infra/writers \
                  infra/s3_tables jobs/maintenance iceberg/s3_tables
MUTATE_DIR     ?= build/mutate
MUTATE_CHILDREN ?= 2
MUTATE_TESTS   ?= $(wildcard tests/unit/test_trigger_*.py) tests/unit/test_batching.py tests/unit/test_ledger.py \
                  $(wildcard tests/unit/test_ledger_*.py) $(wildcard tests/unit/test_drain*.py) tests/unit/test_operator_verbs.py \
                  tests/unit/test_backfill.py tests/unit/test_backfill_report.py $(wildcard tests/unit/test_stage_*.py) tests/unit/test_verify_hops.py tests/unit/test_verify_reads.py tests/unit/test_verify_job_runs.py \
                  tests/unit/test_config.py tests/unit/test_scd2_config.py tests/unit/test_config_store.py \
                  $(wildcard tests/unit/test_formats_*.py) tests/unit/test_schema_plan.py tests/unit/test_table_layout.py \
                  tests/unit/test_retention_cutoffs.py \
                  tests/unit/test_table_state.py tests/unit/test_object_versions.py tests/unit/test_inputs.py \
                  tests/unit/test_s3_tables_config.py tests/unit/test_retry.py \
                  tests/unit/test_reconciliation_rules.py tests/unit/test_repair_rows.py $(wildcard tests/unit/test_reader_grants*.py) \
                  tests/unit/test_unreadable_bisect.py tests/unit/test_assign_inputs.py tests/unit/test_run_summary_lines.py \
                  tests/unit/test_snapshot_columns.py \
                  tests/unit/test_maintenance_plan.py tests/unit/test_s3_tables_engine.py tests/unit/test_orphans_under_lake_formation.py \
                  $(MUTATE_NEEDS_JARS)
# the copy has no .lakeloader/jars, which a local Spark session's settings read
MUTATE_NEEDS_JARS := --deselect tests/unit/test_s3_tables_engine.py::test_an_emulated_session_gets_the_s3_tables_catalog_on_the_emulator
MUTATE_INFRA_TESTS ?= tests/infra/test_infra_network.py tests/infra/test_infra_first_deploy.py tests/infra/test_infra_readers.py \
                  tests/infra/test_infra_reader_grants.py \
                  tests/infra/test_infra_s3_tables_readers.py \
                  tests/infra/test_infra_encryption.py tests/infra/test_infra_storage.py tests/infra/test_infra_storage_lifecycle.py \
                  tests/infra/test_infra_shared_account.py tests/infra/test_infra_writers_alone.py tests/infra/test_infra_s3_tables_alone.py
# module:function (Class.method) that only a Spark test can run: their mutants are counted apart
MUTATE_SPARK_ONLY ?= formats/base:SourceFormat.read_checked formats/base:SourceFormat.operation \
                  formats/debezium:Debezium.read_checked formats/debezium:Debezium._unwrap \
                  formats/debezium:Debezium.reshape formats/debezium:Debezium.operation \
                  formats/debezium:Debezium.decode formats/debezium_envelope:DebeziumEnvelope.reshape \
                  formats/dms:Dms.operation formats/files:_read_csv formats/files:read_rows \
                  formats/files:parquet_schemas formats/files:merge_schemas formats/files:replace_checked \
                  formats/files:lenient_cast formats/debezium:decimal_sql \
                  formats/full_copy:FullCopy.read_checked formats/full_copy:folder_value \
                  engine/schema:typed_columns engine/schema:_iceberg_type engine/schema:apply_plan \
                  engine/schema:create_table engine/schema:_aligned engine/schema:align \
                  engine/full_copy:sequence_of engine/full_copy:_same engine/full_copy:as_changes \
                  engine/repair:Comparison.samples engine/repair:Comparison.release engine/repair:_read \
                  engine/repair:_successor engine/repair:repair_sequence engine/repair:stamped \
                  engine/repair:compare_snapshot engine/repair:_live engine/repair:repair_difference \
                  engine/unreadable:spark_read_error engine/unreadable:find_unreadable \
                  jobs/load:run_tables jobs/load:finish_lineage jobs/load:output_schema jobs/load:skip_files \
                  jobs/load:_without_skipped jobs/load:_load_setting_aside jobs/load:load_table \
                  jobs/maintenance:_commit_retry_properties jobs/maintenance:_drop_stale_audit_branches \
                  jobs/maintenance:_rewrite_data_files jobs/maintenance:_rewrite_position_delete_files \
                  jobs/maintenance:_rewrite_manifests jobs/maintenance:_expire jobs/maintenance:_expire_snapshots \
                  jobs/maintenance:_remove_orphan_files jobs/maintenance:_purge_tombstones \
                  jobs/maintenance:maintain_table jobs/maintenance:maintain_tables iceberg/s3_tables:drop_table
# The score per module, as mutmut's badge counts it: (killed + timeout) / (all checked but skipped), then
# per package. Counted apart, outside the score: the mutants of a Spark-only function, and prose -- a
# mutant whose function equals the original once every help=, description=, metavar= and sid= argument
# (argparse's help, a resource's description, an IAM statement's label: IAM only asks Sids to be unique in
# their policy, and a mutant's stay so) and the reason= of a scanner acknowledgement (infra/nag.py: the
# text cdk-nag and checkov record beside a finding; `function:argument` names an argument of one
# function alone, as the trigger's own reason= arguments are behaviour) is left out.
MUTATE_PROSE_ARGS := help description metavar sid acknowledge:reason acknowledge_check:reason \
                     acknowledge_wildcards:reason
export MUTATE_PROSE_ARGS
define MUTATION_SCORE_PY
import ast, collections, json, os, pathlib
from mutmut.stats import status_by_exit_code as status
spark = {tuple(spec.split(":")) for spec in os.environ.get("MUTATE_SPARK_ONLY", "").split()}
PROSE = set(os.environ["MUTATE_PROSE_ARGS"].split())
def prose_argument(call, keyword):
    callee = getattr(call.func, "id", None) or getattr(call.func, "attr", None)
    return keyword.arg in PROSE or f"{callee}:{keyword.arg}" in PROSE
class Unprose(ast.NodeTransformer):
    def visit_Call(self, node):
        node.keywords = [k for k in node.keywords if not prose_argument(node, k)]
        return self.generic_visit(node)
def functions(path):  # mangled name -> its body without prose
    defs = [f for f in ast.walk(ast.parse(path.read_text())) if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)]
    return {f.name: ast.dump(Unprose().visit(ast.Module(f.body, []))) for f in defs if "__mutmut_" in f.name}
def function(key):  # lakeloader.formats.dms.xǁDmsǁoperation__mutmut_3 -> Dms.operation
    name = key.rsplit(".", 1)[1].rsplit("__mutmut_", 1)[0]
    return name[2:].replace("ǁ", ".") if name.startswith("xǁ") else name[2:]
rows, packages = [], collections.defaultdict(collections.Counter)
for meta in sorted(pathlib.Path("mutants").rglob("*.py.meta")):
    module = meta.relative_to("mutants").as_posix()[:-8].removeprefix("lakeloader/")
    bodies, n = functions(meta.with_suffix("")), collections.Counter()
    for key, code in json.loads(meta.read_text())["exit_code_by_key"].items():
        mangled = key.rsplit(".", 1)[1]
        prose = bodies.get(mangled) == bodies.get(mangled.rsplit("__mutmut_", 1)[0] + "__mutmut_orig")
        n["spark" if (module, function(key)) in spark else "prose" if prose else status[code]] += 1
    rows.append((module, n))
    packages[module.split("/")[0]].update(n)
rows += [(f"{name}/ (all)", n) for name, n in packages.items() if sum(m.startswith(name + "/") for m, _ in rows) > 1]
print("module                   killed timeout survived no-tests  score   prose spark-only")
for module, n in rows:
    caught, checked = n["killed"] + n["timeout"], n["killed"] + n["timeout"] + n["survived"] + n["no tests"]
    score = f"{100 * caught / checked:5.1f}%" if checked else "    -"
    print(f"{module:24} {n['killed']:7} {n['timeout']:7} {n['survived']:8} {n['no tests']:8}  {score}  {n['prose']:6} {n['spark']:10}"
          + (f"  ({n['not checked']} not checked)" if n["not checked"] else ""))
endef
export MUTATION_SCORE_PY
export MUTATE_SPARK_ONLY
MUTMUT := mutmut==3.8.1
comma := ,
MUTATE_LAKE  = $(filter-out infra/%,$(MUTATE_MODULES))
MUTATE_INFRA = $(filter infra/%,$(MUTATE_MODULES))
# What each half's tests read besides the code they mutate (copied, and mutmut's also_copy)
MUTATE_LAKE_COPY  := infra lakeloader_dev config examples lambda docs
MUTATE_INFRA_COPY := lakeloader lakeloader_dev config examples lambda glue_jobs emr_steps docs cdk.json app.py \
                     requirements-job.txt requirements-lambda.txt
# $(call mutmut_config,source dir,modules,tests,also_copy[,pytest args]): the [tool.mutmut] section.
# Timeouts: a mutant's tests may take 5 times what they took unmutated, plus two minutes for the
# process to start on a loaded machine (mutmut's defaults, 15 times plus a second, let one endless
# mutant hold a worker for most of an hour).
mutmut_config = printf '\n[tool.mutmut]\nsource_paths = ["$(1)"]\nalso_copy = [%s]\nonly_mutate = [%s]\npytest_add_cli_args = ["-p", "no:cacheprovider"$(5)]\npytest_add_cli_args_test_selection = [%s]\ntimeout_multiplier = 5.0\ntimeout_constant = 120.0\n' \
	  '$(subst " ","$(comma) ",$(patsubst %,"%",$(4)))' \
	  '$(foreach m,$(2),"$(1)/$(m).py"$(comma) "$(1)/$(m)/*"$(comma))' \
	  '$(subst " ","$(comma) ",$(patsubst %,"%",$(3)))'
# Prose is not mutated: the lines of a prose argument (MUTATE_PROSE_ARGS) that hold nothing else
# (argparse's help, a resource's description, a statement's label) become do_not_mutate_patterns;
# a prose argument that shares its line with code is mutated, and its mutants are counted apart
# (MUTATION_SCORE_PY).
define MUTATE_PROSE_PY
import ast, json, os, re, sys
from pathlib import Path
patterns, prose = set(), os.environ["MUTATE_PROSE_ARGS"].split()
for path in sys.argv[1:]:
    lines = Path(path).read_text().splitlines()
    calls = [node for node in ast.walk(ast.parse("\n".join(lines))) if isinstance(node, ast.Call)]
    for call in calls:
        callee = getattr(call.func, "id", None) or getattr(call.func, "attr", None)
        for node in call.keywords:
            if node.arg not in prose and f"{callee}:{node.arg}" not in prose:
                continue
            own_line = lines[node.lineno - 1][: node.col_offset].strip() == ""
            for n in range(node.lineno if own_line else node.lineno + 1, node.end_lineno + 1):
                patterns.add("^" + re.escape(lines[n - 1]) + "$$")
print(f"do_not_mutate_patterns = {json.dumps(sorted(patterns))}")
endef
export MUTATE_PROSE_PY
# mutmut ends an overdue mutant with SIGXCPU to the pid it had, also after that mutant has ended, and
# pids (thread ids too) come round in minutes here: that signal goes only to a process that is still
# the sender's own child.
define MUTMUT_PY
import os, sys, time
import mutmut.workers.timeout as timeout
def parent(pid):
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return int(stat.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None
class OwnChildrenOnly:
    def __getattr__(self, name):
        return getattr(os, name)
    def kill(self, pid, signal):
        if parent(pid) == os.getpid():
            os.kill(pid, signal)
timeout.os = OwnChildrenOnly()
# infra (MUTMUT_INFRA_RUNNER): the tests share each synth through a cache, so the test that happened to
# synthesize first is the only one mutmut sees calling a construct; the others read the same template.
# A mutant of a function any test calls therefore runs every test of the set: first the tests seen
# calling it, then the rest of their files, then the others, the quickest first in each (pytest runs
# them in the order given). And every mutant runs in the one process that already loaded aws-cdk-lib
# into its jsii kernel: a fresh process spends about 10 s there before its first synth, where a warm
# one synthesizes in 2-3 (the synth cache is emptied before each mutant; the tests keep no other state).
if os.environ.get("MUTMUT_INFRA_RUNNER"):
    import mutmut.__main__ as main
    class InOrder(set):
        def __init__(self, ordered):
            super().__init__(ordered)
            self.ordered = ordered
        def __iter__(self):
            return iter(self.ordered)
    from mutmut.workers import isolation
    collect_stats = main.collect_or_load_stats
    def every_test(*args, **kwargs):
        collect_stats(*args, **kwargs)
        tests, duration = main.state().tests_by_mangled_function_name, main.state().duration_by_test
        everything = set(duration)  # every test of the set, as the stats run timed them
        for name, seen in list(tests.items()):
            files = {test.split("::")[0] for test in seen}
            rank = lambda test: (test not in seen, test.split("::")[0] not in files, duration.get(test, 0))
            tests[name] = InOrder(sorted(everything, key=rank))
    main.collect_or_load_stats = every_test
    class InProcess(isolation.ForkRunner):
        def startup(self):
            self.results = []
        def submit(self, mutant_name, tests, cpu_time_limit, estimated_time):
            for module in list(sys.modules.values()):
                if getattr(module, "__file__", "") and module.__file__.endswith("tests/infra/conftest.py"):
                    module._CACHE.clear()
            started, out, err = time.monotonic(), sys.stdout, sys.stderr
            isolation.set_mutant_under_test(mutant_name)
            sys.stdout = sys.stderr = open(os.devnull, "w")
            try:
                code = self.test_runner.run_tests(mutant_name=mutant_name, tests=list(tests)) if tests else 33
            finally:
                sys.stdout.close()
                sys.stdout, sys.stderr = out, err
                isolation.set_mutant_under_test("")
            self.results.append(isolation.MutantResult(mutant_name, code, time.monotonic() - started))
        def has_capacity(self):  # full while a result waits: mutmut records each one as it comes
            return not self.results
        def wait_for_result(self, timeout=None):
            return self.results.pop(0)
        def pending_count(self):
            return len(self.results)
        def shutdown(self):
            pass
    def in_process(max_workers=1):
        runner = isolation.PytestRunner()
        runner.prepare_main_test_run()
        return InProcess(1, runner)
    main.get_mutant_runner = in_process
sys.argv[0] = "mutmut"
from mutmut.__main__ import cli
cli()
endef
export MUTMUT_PY
# $(call mutmut_run,dir[,environment]): run, then the scores and the survivors. Its temporary files
# stay in dir/tmp (removed with the copy by the next run), not in the shared /tmp: a killed mutant's
# session keeps its base temp, and thousands of them filled a disk once.
mutmut_run = mkdir -p $(1)/tmp && cd $(1) && { TMPDIR=$(abspath $(1))/tmp $(2) $(abspath $(PY)) -c "$$MUTMUT_PY" run --max-children $(MUTATE_CHILDREN) > mutmut-run.log 2>&1 || { tail -30 mutmut-run.log; exit 1; }; } \
	&& $(abspath $(PY)) -c "$$MUTATION_SCORE_PY" && $(abspath $(PY)) -m mutmut results
mutate: $(STAMP)
	$(PY) -m pip install --quiet $(MUTMUT)
ifeq ($(MUTATE_RESUME),)
	rm -rf $(MUTATE_DIR)/lakeloader $(MUTATE_DIR)/infra
endif
ifneq ($(strip $(MUTATE_LAKE)),)
ifeq ($(MUTATE_RESUME),)
	mkdir -p $(MUTATE_DIR)/lakeloader
	cp -r lakeloader tests pyproject.toml $(MUTATE_LAKE_COPY) $(MUTATE_DIR)/lakeloader/
	$(call mutmut_config,lakeloader,$(MUTATE_LAKE),$(MUTATE_TESTS),$(MUTATE_LAKE_COPY)) >> $(MUTATE_DIR)/lakeloader/pyproject.toml
	$(PY) -c "$$MUTATE_PROSE_PY" $(wildcard $(foreach m,$(MUTATE_LAKE),lakeloader/$(m).py lakeloader/$(m)/*.py)) >> $(MUTATE_DIR)/lakeloader/pyproject.toml
endif
	$(call mutmut_run,$(MUTATE_DIR)/lakeloader)
endif
# infra: every mutant in one process (MUTMUT_PY's MUTMUT_INFRA_RUNNER: a fork must not share aws_cdk's jsii
# kernel, a node process, and a fresh one takes 10 s to warm up). The synth reads the checkout (cdk.json,
# the entry points), the cached wheels and, for the S3 Tables catalog, the jars lakeloader_dev.jars caches.
# Each mutant's session reuses one --basetemp, which pytest empties as a session starts: its synths
# write about half a gigabyte there.
ifneq ($(strip $(MUTATE_INFRA)),)
ifeq ($(MUTATE_RESUME),)
	mkdir -p $(MUTATE_DIR)/infra/.lakeloader
	cp -r infra tests pyproject.toml $(MUTATE_INFRA_COPY) $(MUTATE_DIR)/infra/
	cp -r .lakeloader/wheels .lakeloader/jars $(MUTATE_DIR)/infra/.lakeloader/
	$(call mutmut_config,infra,$(patsubst infra/%,%,$(MUTATE_INFRA)),$(MUTATE_INFRA_TESTS),$(MUTATE_INFRA_COPY) .lakeloader,$(comma) "--basetemp"$(comma) "$(abspath $(MUTATE_DIR))/infra/tmp/pytest") >> $(MUTATE_DIR)/infra/pyproject.toml
	$(PY) -c "$$MUTATE_PROSE_PY" $(wildcard $(foreach m,$(MUTATE_INFRA),$(m).py $(m)/*.py)) >> $(MUTATE_DIR)/infra/pyproject.toml
endif
	$(call mutmut_run,$(MUTATE_DIR)/infra,MUTMUT_INFRA_RUNNER=1)
endif

clean:
	rm -rf .venv .venv-glue-6.0 .venv-glue-6.1 $(SCAN_VENV) node_modules cdk.out build/cdk-assets .lakeloader
