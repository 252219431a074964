# Two commands set everything up: `make run` (the demo) and `make test` (the suite).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000
# The suite runs on real PostgreSQL and Redis; override to point elsewhere.
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/messaging
TEST_REDIS_URL ?= redis://127.0.0.1:6379/1

.PHONY: install run test clean bench chaos

$(VENV)/.installed: requirements.txt requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	touch $@

install: $(VENV)/.installed

# Embedded defaults (SQLite, in-memory layer) unless DATABASE_URL / REDIS_URL are set.
run: install
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/daphne -b $(HOST) -p $(PORT) project.asgi:application

# The outbox module's own fast tests first (Node's runner), then pytest, whose
# tests/browser drive /usr/bin/chromium when it is there (`.ci/run` installs it).
test: install
	node --test --test-reporter=spec tests/js/
	DATABASE_URL="$${DATABASE_URL:-$(TEST_DATABASE_URL)}" REDIS_URL="$${REDIS_URL:-$(TEST_REDIS_URL)}" \
		$(BIN)/python -m pytest $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) staticfiles .pytest_cache .hypothesis artifacts

# The benchmark (docs/PERFORMANCE.md): a few minutes; its own database and Redis db.
# BENCH_ARGS="--rounds 1 --idle 0" for a quick look.
bench: install
	$(BIN)/pip install --quiet --disable-pip-version-check -r requirements-bench.txt
	$(BIN)/python -m bench $(BENCH_ARGS)

# The chaos run (docs/RELIABILITY.md): outbox clients under a seeded nemesis, then the
# history checker; exit status 1 on a violation. Its own databases (named after the
# test database) and redis-server; files in artifacts/chaos/seed-<seed>/.
# CHAOS_SEED unset: a random seed, printed. CHAOS_PLANT: a planted bug (tests/chaos/hooks.py).
CHAOS_SECONDS ?= 300
CHAOS_CLIENTS ?= 30
CHAOS_SEED ?=
CHAOS_PLANT ?=
chaos: install
	DATABASE_URL="$${DATABASE_URL:-$(TEST_DATABASE_URL)}" CHAOS_SECONDS="$(CHAOS_SECONDS)" CHAOS_CLIENTS="$(CHAOS_CLIENTS)" \
		CHAOS_SEED="$(CHAOS_SEED)" CHAOS_PLANT="$(CHAOS_PLANT)" $(BIN)/python -m tests.chaos
