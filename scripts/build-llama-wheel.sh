#!/usr/bin/env bash
# Build (once) and cache a portable llama-cpp-python wheel, then print its path.
# Native builds (-march=native) pick up AMX/AVX-512 paths that crash on some virtual CPUs here, so we
# build for AVX2/FMA/F16C only. The sdist compiles in ~8 minutes on 2 cores; the wheel is reused after.
set -euo pipefail
VERSION="${LLAMA_CPP_VERSION:-0.3.36}"
CACHE="${COMPASSMEM_WHEEL_CACHE:-$HOME/.cache/compassmem/wheels}"
mkdir -p "$CACHE"
wheel=$(ls "$CACHE"/llama_cpp_python-"$VERSION"-*.whl 2>/dev/null | head -n1 || true)
if [ -z "$wheel" ]; then
  echo "building llama-cpp-python $VERSION (cached afterwards in $CACHE)…" >&2
  CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF \
-DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DLLAMA_CURL=OFF" \
  CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
    python -m pip wheel --no-deps --no-cache-dir "llama-cpp-python==$VERSION" -w "$CACHE" >&2
  wheel=$(ls "$CACHE"/llama_cpp_python-"$VERSION"-*.whl | head -n1)
fi
echo "$wheel"
