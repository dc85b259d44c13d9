#!/usr/bin/env bash
# The one entry point of the InfiLoop companion.
#
#   ./reproduce.sh                    set up .venv if needed, then run everything (profile tiny)
#   ./reproduce.sh --profile paper    the paper's configuration (GPU)
#   ./reproduce.sh --only NAME -p KEY VALUE ...   one notebook, papermill parameters
#   ./reproduce.sh test [PYTEST ARGS] set up .venv if needed, then run the test suite
#   ./reproduce.sh setup              only set up .venv
#
# Environment: PYTHON (interpreter used to create .venv, default python3.11 or python3),
# INFILOOP_VENV (default .venv), INFILOOP_TORCH (a pip requirement that overrides the torch choice).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$ROOT"
VENV="${INFILOOP_VENV:-$ROOT/.venv}"
PY="$VENV/bin/python"

log() { printf '[reproduce] %s\n' "$*" >&2; }

pick_python() {
    if [ -n "${PYTHON:-}" ]; then echo "$PYTHON"; return; fi
    for c in python3.11 python3.12 python3.10 python3; do
        if command -v "$c" >/dev/null 2>&1; then echo "$c"; return; fi
    done
    log "no Python 3 interpreter found (need 3.10 or newer)"; exit 1
}

has_cuda_gpu() {
    command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1
}

install_torch() {
    if "$PY" -c "import torch" >/dev/null 2>&1; then
        log "torch $("$PY" -c 'import torch; print(torch.__version__)') already installed"
        return
    fi
    if [ -n "${INFILOOP_TORCH:-}" ]; then
        log "installing torch from INFILOOP_TORCH=$INFILOOP_TORCH"
        "$PY" -m pip install "$INFILOOP_TORCH"
        return
    fi
    if has_cuda_gpu; then
        log "CUDA GPU found: installing the default (CUDA) torch build"
        "$PY" -m pip install "torch>=2.4"
        return
    fi
    # No GPU: a CPU build. Prefer a CPU wheel that pip can already see locally (find-links);
    # otherwise take one from the PyTorch CPU index. Never a bare `torch` (a multi-GB CUDA build).
    local tmp wheel
    tmp="$(mktemp -d)"
    if "$PY" -m pip download --quiet --no-index --no-deps "torch>=2.4" -d "$tmp" >/dev/null 2>&1; then
        wheel="$(ls "$tmp"/torch-*+cpu*.whl 2>/dev/null | head -n 1 || true)"
        if [ -n "$wheel" ]; then
            log "no GPU: installing the local CPU build $(basename "$wheel")"
            "$PY" -m pip install "$wheel"
            rm -rf "$tmp"
            return
        fi
    fi
    rm -rf "$tmp"
    log "no GPU: installing torch from the PyTorch CPU index"
    "$PY" -m pip install "torch>=2.4" --index-url https://download.pytorch.org/whl/cpu \
        --extra-index-url https://pypi.org/simple
}

setup() {
    local stamp="$VENV/.infiloop-setup" want
    want="$(cat pyproject.toml reproduce.sh | sha256sum | cut -c1-16)"
    if [ -x "$PY" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
        return
    fi
    if [ ! -x "$PY" ]; then
        local base; base="$(pick_python)"
        log "creating $VENV with $base ($("$base" --version 2>&1))"
        "$base" -m venv "$VENV"
    fi
    install_torch
    log "installing the infiloop package and its tools (pip install -e .[dev])"
    "$PY" -m pip install --quiet -e ".[dev]"
    # papermill needs a kernel named python3 inside this environment (never a path in $HOME).
    "$PY" -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (infiloop)" >/dev/null
    echo "$want" > "$stamp"
    log "environment ready: $VENV"
}

cmd="${1:-run}"
case "$cmd" in
    setup)
        setup
        ;;
    test)
        shift
        setup
        log "running the test suite"
        exec "$PY" -m pytest "$@"
        ;;
    -h|--help|help)
        sed -n '2,12p' "$0"
        ;;
    *)
        setup
        exec "$PY" -m infiloop reproduce "$@"
        ;;
esac
