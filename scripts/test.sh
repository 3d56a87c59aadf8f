#!/usr/bin/env bash
# The project's test command: fast suite + real-LLM tests against local GGUF models + the viewer in Chromium.
#   bash scripts/test.sh            everything (installs what is missing; first run builds llama.cpp)
#   bash scripts/test.sh --fast     unit + in-process tests (no model, server, database server, browser: ~1 min)
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
# the package and its test dependencies, installed again only when pyproject.toml changed (pip's own
# check of an installed tree took ~9 s of --fast's 90)
STAMP="$("$PY" -c 'import sys; print(sys.prefix)')/.compassmem-dev-deps"
WANT="$(sha256sum pyproject.toml | cut -d' ' -f1) $(pwd)"
if [ "$(cat "$STAMP" 2>/dev/null)" != "$WANT" ] || ! "$PY" -c "import sys, pytest, hypothesis, compassmem
sys.exit(not compassmem.__file__.startswith('$(pwd)/'))" 2>/dev/null; then
  "$PY" -m pip install -q -e ".[dev]"
  echo "$WANT" > "$STAMP" 2>/dev/null || true
fi
if [ "${1:-}" = "--fast" ]; then
  exec "$PY" -m pytest -m "not llm and not integration"
fi

wheel=$(PATH="$(dirname "$(command -v "$PY")"):$PATH" bash scripts/build-llama-wheel.sh)
"$PY" -m pip install -q "$wheel"
"$PY" -m pip install -q "fastapi>=0.100" "uvicorn>=0.22" "sse-starlette>=1.6.1" "starlette-context>=0.3.6,<0.4" \
  "pydantic-settings>=2.0.1" "PyYAML>=5.1"
SMOKE=$("$PY" -m compassmem models fetch "${COMPASSMEM_SMOKE_MODEL:-qwen2.5-coder-0.5b}" | tail -n1)
BUILD=$("$PY" -m compassmem models fetch "${COMPASSMEM_BUILD_MODEL:-qwen2.5-coder-0.5b}" | tail -n1)

PORT="${COMPASSMEM_TEST_PORT:-8765}"
LOG=$(mktemp)
"$PY" -m llama_cpp.server --model "$SMOKE" --host 127.0.0.1 --port "$PORT" --n_ctx 4096 >"$LOG" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 1 120); do
  if curl -sf "http://127.0.0.1:$PORT/v1/models" >/dev/null; then break; fi
  if ! kill -0 $SERVER 2>/dev/null; then echo "llama_cpp.server died:"; cat "$LOG"; exit 1; fi
  sleep 1
done
curl -sf "http://127.0.0.1:$PORT/v1/models" >/dev/null || { echo "llama_cpp.server did not start"; cat "$LOG"; exit 1; }

# the graph viewer is tested in a real headless Chromium (Debian's package)
if ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null; then
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "the viewer tests need Chromium: install Debian's 'chromium' package (or run --fast)"; exit 1
  fi
fi

export COMPASSMEM_TEST_GGUF="$SMOKE" COMPASSMEM_TEST_BASE_URL="http://127.0.0.1:$PORT/v1" COMPASSMEM_TEST_GGUF_BUILD="$BUILD"
export COMPASSMEM_REQUIRE_BROWSER=1
"$PY" -m pytest
# the PostgreSQL tests once more on a newer server, as a user's own would be: PostgreSQL 18 + pgvector 0.8
COMPASSMEM_TEST_PG=pixeltable-18 "$PY" -m pytest -q -m "not llm" -k postgres
