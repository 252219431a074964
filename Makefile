# Two commands set everything up: `make run` (the demo) and `make test` (the suite).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000
# The suite runs on real PostgreSQL and Redis; override to point elsewhere.
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/messaging
TEST_REDIS_URL ?= redis://127.0.0.1:6379/1

.PHONY: install run test clean bench lock audit chaos docs lint

# requirements*.txt are the pins people edit; requirements*.lock (`make lock`)
# pin every package beneath them with the hashes of its files, and pip
# installs nothing else and nothing whose hash differs.
PIP_INSTALL := $(BIN)/pip install --quiet --disable-pip-version-check --require-hashes
LOCKS := requirements.lock requirements-dev.lock requirements-bench.lock requirements-docs.lock

# The Python client (clients/python) is installed too, editable, for the suite and
# the tools that use it; its one dependency, websockets, is pinned in the lock.
$(VENV)/.installed: requirements-dev.lock clients/python/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP_INSTALL) -r requirements-dev.lock
	$(BIN)/pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation --editable clients/python
	touch $@

install: $(VENV)/.installed

# Embedded defaults (SQLite, in-memory layer) unless DATABASE_URL / REDIS_URL are set.
# The demo runs with DEBUG on (its development key, static files from the
# source tree); the settings default to off, as a deployment must.
run: install
	DEBUG="$${DEBUG:-1}" $(BIN)/python manage.py migrate --noinput
	DEBUG="$${DEBUG:-1}" $(BIN)/daphne -b $(HOST) -p $(PORT) project.asgi:application

# The page's modules' and the npm package's fast tests first (Node's runner; the
# package's against its packed tarball), then pytest (the Python client's tests
# too), whose tests/browser drive /usr/bin/chromium when it is there (`.ci/run` installs it).
test: install
	node --test --test-reporter=spec tests/js/ clients/js/tests/
	DATABASE_URL="$${DATABASE_URL:-$(TEST_DATABASE_URL)}" REDIS_URL="$${REDIS_URL:-$(TEST_REDIS_URL)}" \
		$(BIN)/python -m pytest $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) $(DOCS_VENV) site staticfiles .pytest_cache .hypothesis artifacts clients/python/build clients/js/outbox.js

# Lint and types (pyproject.toml's [tool.ruff] and [tool.mypy]); `.ci/run` runs it before the tests.
# `ruff format` and `ruff check --fix` mend what they can.
lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	DEBUG=1 $(BIN)/mypy

# The benchmark (docs/PERFORMANCE.md): a few minutes; its own database and Redis db.
# BENCH_ARGS="--rounds 1 --idle 0" for a quick look.
bench: install
	$(PIP_INSTALL) -r requirements-bench.lock
	$(BIN)/python -m bench $(BENCH_ARGS)

# The documentation site (mkdocs.yml, docs/) into site/, with --strict: a broken
# link or anchor fails it. Its own virtualenv, so the site's packages (MkDocs,
# Material, mkdocstrings) stay out of the app's and the suite's; mkdocstrings
# reads the source with griffe and imports nothing of it.
DOCS_VENV := .venv-docs
$(DOCS_VENV)/.installed: requirements-docs.lock
	$(PYTHON) -m venv $(DOCS_VENV)
	$(DOCS_VENV)/bin/pip install --quiet --disable-pip-version-check --require-hashes -r requirements-docs.lock
	touch $@

docs: $(DOCS_VENV)/.installed
	NO_MKDOCS_2_WARNING=1 $(DOCS_VENV)/bin/mkdocs build --strict

# After editing a requirements*.txt: each lock again from its input (the
# runtime's for deployments, the suite's, the bench's, the docs site's), with hashes.
lock: install
	for name in requirements requirements-dev requirements-bench requirements-docs; do \
		CUSTOM_COMPILE_COMMAND="make lock" $(BIN)/pip-compile --quiet --generate-hashes --allow-unsafe \
			--strip-extras --no-emit-index-url --no-emit-trusted-host --no-emit-find-links \
			-o $$name.lock $$name.txt || exit 1; \
	done

# Known vulnerabilities in every locked package (`.ci/run` runs it); fails on one.
# AUDIT_ARGS=--strict also fails on a package the vulnerability service could not look up.
# Each lock on its own: the docs site's has a venv of its own, and its pins may differ from the others'.
audit: install
	for lock in $(LOCKS); do \
		$(BIN)/pip-audit --progress-spinner off --require-hashes --disable-pip $(AUDIT_ARGS) -r $$lock || exit 1; \
	done

# The chaos run (docs/RELIABILITY.md): outbox clients under a seeded nemesis, then the
# history checker; exit status 1 on a violation. Its own databases (named after the
# test database) and redis-server; files in artifacts/chaos/seed-<seed>/.
# CHAOS_SEED unset: a random seed, printed. CHAOS_PLANT: a planted bug (tests/chaos/hooks.py).
# Then the link nemesis (tests/chaos/link): two federated deployments, faults on the link between
# them, CHAOS_LINK_CLIENTS outbox clients a side, the same seed and length; files in
# artifacts/chaos/link-seed-<seed>/. CHAOS_LINK=0 skips it, CHAOS_LINK=only runs it alone.
CHAOS_SECONDS ?= 300
CHAOS_CLIENTS ?= 30
CHAOS_LINK_CLIENTS ?= 3
CHAOS_SEED ?=
CHAOS_PLANT ?=
CHAOS_LINK ?= 1
chaos: install
	if [ "$(CHAOS_LINK)" != only ]; then \
		DATABASE_URL="$${DATABASE_URL:-$(TEST_DATABASE_URL)}" CHAOS_SECONDS="$(CHAOS_SECONDS)" CHAOS_CLIENTS="$(CHAOS_CLIENTS)" \
		CHAOS_SEED="$(CHAOS_SEED)" CHAOS_PLANT="$(CHAOS_PLANT)" $(BIN)/python -m tests.chaos || exit 1; fi
	if [ "$(CHAOS_LINK)" != 0 ]; then \
		DATABASE_URL="$${DATABASE_URL:-$(TEST_DATABASE_URL)}" CHAOS_SECONDS="$(CHAOS_SECONDS)" \
		CHAOS_LINK_CLIENTS="$(CHAOS_LINK_CLIENTS)" CHAOS_SEED="$(CHAOS_SEED)" $(BIN)/python -m tests.chaos.link; fi
