#!/usr/bin/env bash
# The one entry point of the InfiLoop companion.
#
#   ./reproduce.sh                    set up .venv if needed, then run everything (profile quick, 10-15 min);
#                                     on a CUDA GPU on the GPU, then the gpu profile's offer (pilot, GPU-hours)
#   ./reproduce.sh --profile search   6x6 Sudoku that needs search, three seeds (about 1.6 h on 2 CPU cores)
#   ./reproduce.sh --profile overthink  notebook 09, tasks that extrapolate in size (ten seeds: about 2 h 20 min on one core)
#   ./reproduce.sh --profile gpu      9x9 Sudoku, about one GPU-hour per training (plan --profile gpu prices it)
#   ./reproduce.sh --profile paper    the paper's configuration (GPU)
#   ./reproduce.sh --only NAME -p KEY VALUE ...   one notebook, papermill parameters
#   ./reproduce.sh --profile paper --executor slurm [--wait]   every job on a Slurm cluster (docs/cluster.md);
#                                     the jobs run this environment on GPU nodes: .venv gets torch's CUDA build
#   ./reproduce.sh test [PYTEST ARGS] set up .venv if needed, then run the test suite
#   ./reproduce.sh setup [--cuda]     only set up .venv (--cuda: with torch's CUDA build, even without a GPU here)
#   ./reproduce.sh lock               write requirements-cpu.lock from .venv (after its tests passed; docs/setup.md)
#   ./reproduce.sh torch-choice [--cuda]  print the torch setup would install here (pip's arguments; why on stderr)
#                                     and install nothing: the CUDA wheel index the NVIDIA driver runs (table below)
#
# Which Python: INFILOOP_PYTHON=/path/to/python if set; else the active conda environment
# ($CONDA_PREFIX/bin/python) when it imports torch (conda env create -f environment.yml); either is used
# as it is (no package is installed into it; only papermill's python3 kernel spec if it has none).
# Otherwise .venv is built: PYTHON (interpreter used to create it,
# default python3.11 or python3), INFILOOP_VENV (default .venv; setting it also skips the conda
# environment), INFILOOP_TORCH (pip arguments that override the torch choice, split at blanks, e.g.
# INFILOOP_TORCH='torch==2.13.0 --index-url https://download.pytorch.org/whl/cu126'). Where nvidia-smi answers, torch
# is the CUDA build of the lock's torch version from the wheel index the driver runs (table at "which torch wheel"
# below, docs/gpu.md); a driver too old for every CUDA build stops the setup in one error line. --executor slurm with a
# GPU profile or --device cuda makes .venv's torch the CUDA build (the jobs run it on the nodes); an interpreter used
# as it is is left alone, and python -m infiloop refuses in one line if its torch is a CPU build.
# On the CPU path .venv is installed from requirements-cpu.lock (exact versions, hashes checked; torch the CPU build of
# the version the lock names) when the lock was made for this Python and platform; INFILOOP_UNLOCKED=1 resolves the
# newest versions pyproject.toml allows instead. The report's provenance says whether the environment matches the lock.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$ROOT"
VENV="${INFILOOP_VENV:-$ROOT/.venv}"
PY="$VENV/bin/python"
EXTERNAL=""  # where an interpreter used as it is comes from (empty: .venv)

WANT_CUDA=""  # set: torch's CUDA build, whatever this machine has (jobs of --executor slurm run on GPU nodes)
LOCK="$ROOT/requirements-cpu.lock"
TORCH_SPEC="torch>=2.4"  # the CPU path's torch; the lock's exact version when the lock applies

log() { printf '[reproduce] %s\n' "$*" >&2; }

if [ -n "${INFILOOP_PYTHON:-}" ]; then
    PY="$INFILOOP_PYTHON"; EXTERNAL="INFILOOP_PYTHON"
elif [ -n "${CONDA_PREFIX:-}" ] && [ -z "${INFILOOP_VENV:-}" ] && [ -x "$CONDA_PREFIX/bin/python" ] \
        && "$CONDA_PREFIX/bin/python" -c "import torch" >/dev/null 2>&1; then
    PY="$CONDA_PREFIX/bin/python"; EXTERNAL="the active conda environment (CONDA_PREFIX=$CONDA_PREFIX)"
fi

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

# Whether the run's arguments send CUDA jobs to Slurm: --executor slurm (on its slurm cluster, not --cluster local
# or debug) with --device cuda, or without --device for a profile made for the GPU (gpu, paper: the profiles of
# infiloop/experiments/settings/profiles.py whose device is cuda). Those jobs run this environment's interpreter on the
# nodes, so it needs torch's CUDA build even on a login node without a GPU.
wants_cuda_build() {
    local executor="" cluster="slurm" profile="" device="" prev=""
    for a in "$@"; do
        case "$prev" in
            --executor) executor="$a" ;; --cluster) cluster="$a" ;; --profile) profile="$a" ;; --device) device="$a" ;;
        esac
        case "$a" in
            --executor=*) executor="${a#*=}" ;; --cluster=*) cluster="${a#*=}" ;;
            --profile=*) profile="${a#*=}" ;; --device=*) device="${a#*=}" ;;
        esac
        prev="$a"
    done
    [ "$executor" = slurm ] && [ "$cluster" = slurm ] || return 1
    case "$device" in cuda*) return 0 ;; "") ;; *) return 1 ;; esac
    case "$profile" in gpu|paper) return 0 ;; esac
    return 1
}

torch_is_cpu_build() {
    "$PY" -c "import sys, torch; sys.exit(0 if torch.version.cuda is None else 1)" >/dev/null 2>&1
}

# ------------------------------------------------------------------------------------------------ which torch wheel
# The PyTorch wheel index that this machine's NVIDIA driver runs (sources and reasons: docs/gpu.md), for the torch
# version the lock names (requirements-cpu.lock's "# locked for: ..., torch==X" line):
#
#   driver (nvidia-smi)   GPU compute capability   CUDA build   index (https://download.pytorch.org/whl/...)
#   none answers          -                        CPU          cpu (after a local CPU wheel pip can see)
#   < 525.60.13           any                      none runs    error: update the driver, or INFILOOP_TORCH
#   525.60.13 - 579.x     below 10.0               12.6         cu126  (CUDA 12.x minor-version compatibility)
#   525.60.13 - 579.x     10.0 and up (Blackwell)  12.9         cu129  (cu126 has no Blackwell code)
#   580 and newer         7.5 and up               13.0         cu130  (CUDA 13.x needs >= 580)
#   580 and newer         below 7.5 (Volta ...)    12.6         cu126  (CUDA 13 no longer builds for them)
#   unseen (--cuda, --executor slurm on a login node)  12.6     cu126  (runs on any driver >= 525.60.13)
TORCH_INDEX="https://download.pytorch.org/whl"
DRIVER_MIN_CUDA12="525.60.13"
DRIVER_MIN_CUDA13="580"

# "535.104.05" -> 535104005: one number that orders driver versions (fields missing count as 0).
driver_number() {
    local major minor patch
    IFS=. read -r major minor patch _ <<< "$1"
    printf '%d%03d%03d\n' "$((10#${major:-0}))" "$((10#${minor:-0}))" "$((10#${patch:-0}))"
}

# The first GPU's driver version and compute capability ("535.104.05 9.0"; empty where nvidia-smi does not answer).
nvidia_facts() {
    local driver cap
    command -v nvidia-smi >/dev/null 2>&1 || return 0
    driver="$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n 1 | tr -d ' ')" || true
    [[ "$driver" =~ ^[0-9]+(\.[0-9]+)*$ ]] || return 0
    cap="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d ' ')" || true
    [[ "$cap" =~ ^[0-9]+\.[0-9]+$ ]] || cap="?"
    echo "$driver $cap"
}

# The torch requirement: the lock's version, else any recent one.
locked_torch() {
    local v=""
    if [ -f "$LOCK" ]; then v="$(sed -n 's/^# locked for: .*, torch==\(.*\)$/\1/p' "$LOCK")"; fi
    if [ -n "$v" ]; then echo "torch==$v"; else echo "torch>=2.4"; fi
}

# Sets CHOICE (pip install's arguments), CHOICE_KIND (cuda) and CHOICE_WHY (one line) for the CUDA build this machine's driver
# runs; "unseen" when the driver is not on this machine. Returns 1 (CHOICE_WHY the error) for a driver too old.
choose_cuda_wheel() {
    local facts="$1" driver cap cc flavour why
    if [ "$facts" = unseen ]; then
        flavour=cu126
        why="no NVIDIA driver on this machine (the GPU nodes have their own): torch's CUDA 12.6 build, which runs on any driver >= $DRIVER_MIN_CUDA12 (INFILOOP_TORCH='$(locked_torch) --index-url $TORCH_INDEX/cu130' for CUDA 13)"
    else
        read -r driver cap <<< "$facts"
        cc=0
        if [ "$cap" != "?" ]; then cc=$(( 10#${cap%%.*} * 10 + 10#${cap#*.} )); fi
        if [ "$(driver_number "$driver")" -lt "$(driver_number "$DRIVER_MIN_CUDA12")" ]; then
            CHOICE_WHY="error: NVIDIA driver $driver is older than $DRIVER_MIN_CUDA12, the oldest that PyTorch's CUDA 12 and 13 builds run on: update the driver, or choose torch yourself (INFILOOP_TORCH='$(locked_torch) --index-url $TORCH_INDEX/cpu' for the CPU build)"
            return 1
        elif [ "$(driver_number "$driver")" -ge "$(driver_number "$DRIVER_MIN_CUDA13")" ]; then
            if [ "$cc" -gt 0 ] && [ "$cc" -lt 75 ]; then
                flavour=cu126; why="CUDA 12.6 build (CUDA 13 builds no longer target compute capability $cap)"
            else
                flavour=cu130; why="CUDA 13.0 build (CUDA 13 runs on drivers >= $DRIVER_MIN_CUDA13)"
            fi
        elif [ "$cc" -ge 100 ]; then
            flavour=cu129; why="CUDA 12.9 build (a Blackwell GPU under a driver < $DRIVER_MIN_CUDA13: cu126 has no code for it)"
        else
            flavour=cu126; why="CUDA 12.6 build (CUDA 12 runs on drivers >= $DRIVER_MIN_CUDA12; CUDA 13 would need >= $DRIVER_MIN_CUDA13)"
        fi
        why="NVIDIA driver $driver (GPU compute capability $cap): torch's $why"
    fi
    CHOICE=("$(locked_torch)" --index-url "$TORCH_INDEX/$flavour") CHOICE_KIND=cuda
    CHOICE_WHY="$why"
}

# INFILOOP_TORCH as pip arguments: split at blanks, never globbed ("torch==2.13.0 --index-url https://...").
infiloop_torch_args() {
    local -a words
    read -r -a words <<< "${INFILOOP_TORCH:-}"
    CHOICE=("${words[@]}") CHOICE_KIND=given
    CHOICE_WHY="INFILOOP_TORCH chooses torch"
}

# The torch this setup would install: CHOICE (pip install's arguments), CHOICE_KIND (given, cuda or cpu) and
# CHOICE_WHY (one line); returns 1 for a driver no build runs on. $1: "cuda" when the CUDA build is wanted whatever
# this machine has (jobs on GPU nodes).
torch_choice() {
    local facts
    if [ -n "${INFILOOP_TORCH:-}" ]; then infiloop_torch_args; return 0; fi
    facts="$(nvidia_facts)"
    if [ -z "$facts" ] && [ "${1:-}" = cuda ]; then facts=unseen; fi
    if [ -n "$facts" ]; then choose_cuda_wheel "$facts"; return; fi
    CHOICE=("$TORCH_SPEC" --index-url "$TORCH_INDEX/cpu" --extra-index-url https://pypi.org/simple) CHOICE_KIND=cpu
    CHOICE_WHY="no NVIDIA driver answers (nvidia-smi): torch's CPU build"
}

install_cuda_torch() {
    # The CUDA wheel for the driver (above); a CPU build in place goes first. Without a driver here (a login node):
    # cu126, which runs on any driver >= DRIVER_MIN_CUDA12. With one: chosen by it, though the jobs run under the
    # compute nodes' driver, which is said.
    if ! torch_choice cuda; then log "$CHOICE_WHY"; exit 1; fi
    log "$CHOICE_WHY"
    if [ -z "${INFILOOP_TORCH:-}" ] && [ -n "$(nvidia_facts)" ]; then
        log "warning: this machine's NVIDIA driver chose torch's CUDA build, but the jobs run under the compute nodes' driver, which decides: where theirs is older, choose the build yourself, INFILOOP_TORCH='$(locked_torch) --index-url $TORCH_INDEX/cu126' (runs on any driver >= $DRIVER_MIN_CUDA12)"
    fi
    if "$PY" -c "import torch" >/dev/null 2>&1; then
        log "the jobs of --executor slurm run $PY on GPU nodes: replacing its CPU build of torch by the CUDA build (${CHOICE[*]})"
        "$PY" -m pip uninstall --yes torch
    else
        log "the jobs of --executor slurm run $PY on GPU nodes: installing torch's CUDA build (${CHOICE[*]})"
    fi
    "$PY" -m pip install "${CHOICE[@]}"
}

install_torch() {
    if "$PY" -c "import torch" >/dev/null 2>&1; then
        if [ -n "$WANT_CUDA" ] && torch_is_cpu_build; then
            install_cuda_torch
            return
        fi
        log "torch $("$PY" -c 'import torch; print(torch.__version__)') already installed"
        return
    fi
    if [ -n "$WANT_CUDA" ]; then
        install_cuda_torch
        return
    fi
    if ! torch_choice; then log "$CHOICE_WHY"; exit 1; fi
    if [ "$CHOICE_KIND" != cpu ]; then
        log "$CHOICE_WHY: pip install ${CHOICE[*]}"
        "$PY" -m pip install "${CHOICE[@]}"
        return
    fi
    # No GPU: a CPU build. Prefer a CPU wheel that pip can already see locally (find-links);
    # otherwise take one from the PyTorch CPU index. Never a bare `torch` (a multi-GB CUDA build).
    local tmp wheel
    tmp="$(mktemp -d)"
    if "$PY" -m pip download --quiet --no-index --no-deps "$TORCH_SPEC" -d "$tmp" >/dev/null 2>&1; then
        wheel="$(ls "$tmp"/torch-*+cpu*.whl 2>/dev/null | head -n 1 || true)"
        if [ -n "$wheel" ]; then
            log "no GPU: installing the local CPU build $(basename "$wheel")"
            "$PY" -m pip install "$wheel"
            rm -rf "$tmp"
            return
        fi
    fi
    rm -rf "$tmp"
    log "no GPU: installing torch from the PyTorch CPU index ($TORCH_SPEC)"
    "$PY" -m pip install "${CHOICE[@]}"
}

setup_external() {
    # An interpreter given to us: check it, never install packages into it.
    if ! command -v "$PY" >/dev/null 2>&1; then
        log "$EXTERNAL: $PY is not an executable Python"; exit 1
    fi
    if ! "$PY" -c "import torch, numpy, pandas, yaml, safetensors, filelock, matplotlib, seaborn, papermill, jupytext, nbformat, nbconvert, ipykernel, huggingface_hub" >/dev/null 2>&1; then
        log "$EXTERNAL: $PY lacks some of the packages of environment.yml (conda env update -f environment.yml)"
        exit 1
    fi
    # papermill needs a kernel named python3 that runs this interpreter: install it into its prefix if absent.
    if ! "$PY" -c "import os, sys; sys.exit(not os.path.isfile(os.path.join(sys.prefix, 'share/jupyter/kernels/python3/kernel.json')))"; then
        "$PY" -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (infiloop)" >/dev/null
    fi
    export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"  # the package from this checkout, installed or not
    log "using $PY from $EXTERNAL (no .venv is built)"
}

# Why the lock does not apply to this setup ("" when it does): no lock, INFILOOP_UNLOCKED, a torch of one's own, or a
# lock made for another Python or platform. A CUDA build of torch takes the lock all the same: torch (not hash-locked)
# from the CUDA index with its own dependencies (the nvidia-* libraries, triton), then every other package of the
# lock at its exact version, hashes checked and no dependency of its own (install_locked).
lock_refusal() {
    if [ ! -f "$LOCK" ]; then echo "no requirements-cpu.lock"; return; fi
    if [ -n "${INFILOOP_UNLOCKED:-}" ]; then echo "INFILOOP_UNLOCKED is set"; return; fi
    if [ -n "${INFILOOP_TORCH:-}" ]; then echo "INFILOOP_TORCH chooses torch"; return; fi
    local made here
    made="$(sed -n 's/^# locked for: python \([0-9.]*\), \([^,]*\), torch==.*$/\1 \2/p' "$LOCK")"
    here="$("$PY" -c 'import platform, sys; print(f"{sys.version_info[0]}.{sys.version_info[1]} {platform.system().lower()}-{platform.machine().lower()}")')"
    if [ "$made" != "$here" ]; then echo "the lock is for python ${made:-?}, this is python $here"; fi
}

install_locked() {
    TORCH_SPEC="torch==$(sed -n 's/^# locked for: .*, torch==\(.*\)$/\1/p' "$LOCK")"
    install_torch
    if torch_is_cpu_build; then
        log "installing the locked environment (requirements-cpu.lock: exact versions, hashes checked)"
    else
        log "installing the lock's other packages beside torch's CUDA build (requirements-cpu.lock: exact versions, hashes checked, no dependencies of their own)"
    fi
    "$PY" -m pip install --quiet --require-hashes --no-deps -r "$LOCK"
    # setuptools' build of the editable install warns in a block of asterisks about a folder named as the package
    # in the working directory (this checkout's own infiloop/): nothing to act on, so not shown
    PYTHONWARNINGS=ignore "$PY" -m pip install --quiet --no-deps -e .
}

write_lock() {
    # The environment's own pins (torch aside: not hash-locked) compiled with the index's hashes by pip-tools.
    local tmp torch_version made
    tmp="$(mktemp -d)"
    "$PY" -m pip freeze --exclude-editable | grep -v -i -E '^(torch|infiloop)( |=|@)' > "$tmp/pins.in"
    torch_version="$("$PY" -c 'import torch; print(torch.__version__.split("+")[0])')"
    made="$("$PY" -c 'import platform, sys; print(f"python {sys.version_info[0]}.{sys.version_info[1]}, {platform.system().lower()}-{platform.machine().lower()}")')"
    log "compiling $(wc -l < "$tmp/pins.in") pinned packages with their hashes (pip-tools; a few minutes)"
    "$PY" -m piptools compile --quiet --generate-hashes --allow-unsafe --no-strip-extras --no-emit-index-url \
        --no-emit-find-links --no-header --no-annotate -o "$tmp/lock.txt" "$tmp/pins.in"
    {
        echo "# The exact environment the test suite and the default run passed with (infiloop/machine.py)."
        echo "# Installed by ./reproduce.sh setup on the CPU path; refreshed by ./reproduce.sh lock; $(date -u +%Y-%m-%d)."
        echo "# locked for: $made, torch==$torch_version"
        echo "# torch: the CPU build of that version, installed by reproduce.sh (not hash-locked: its wheels differ by index)."
        cat "$tmp/lock.txt"
    } > "$LOCK.tmp"
    mv "$LOCK.tmp" "$LOCK"
    rm -rf "$tmp"
    log "wrote $LOCK ($(grep -c '==' "$LOCK") packages)"
}

setup() {
    if [ -n "$EXTERNAL" ]; then setup_external; return; fi
    local stamp="$VENV/.infiloop-setup" want locked=()
    if [ -f "$LOCK" ]; then locked=("$LOCK"); fi
    want="$({ cat pyproject.toml reproduce.sh "${locked[@]}"; if [ -n "${INFILOOP_UNLOCKED:-}" ]; then echo unlocked; fi; } \
        | sha256sum | cut -c1-16)"
    if [ -x "$PY" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
        if [ -n "$WANT_CUDA" ] && torch_is_cpu_build; then
            install_cuda_torch
        fi
        return
    fi
    if [ ! -x "$PY" ]; then
        local base; base="$(pick_python)"
        log "creating $VENV with $base ($("$base" --version 2>&1))"
        "$base" -m venv "$VENV"
    fi
    local refusal; refusal="$(lock_refusal)"
    if [ -z "$refusal" ]; then
        install_locked
    else
        log "not installing from the lock ($refusal): the newest versions pyproject.toml allows"
        install_torch
        log "installing the infiloop package and its tools (pip install -e .[dev])"
        PYTHONWARNINGS=ignore "$PY" -m pip install --quiet -e ".[dev]"  # as in install_locked
    fi
    # papermill needs a kernel named python3 inside this environment (never a path in $HOME).
    "$PY" -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (infiloop)" >/dev/null
    echo "$want" > "$stamp"
    log "environment ready: $VENV"
}

cmd="${1:-run}"
case "$cmd" in
    setup)
        if [ "${2:-}" = "--cuda" ]; then WANT_CUDA=1; fi
        setup
        ;;
    lock)
        if [ -n "$EXTERNAL" ] || [ ! -x "$PY" ]; then
            log "error: ./reproduce.sh lock writes the lock from a .venv that reproduce.sh built (none at $VENV): run ./reproduce.sh test first"
            exit 1
        fi
        write_lock
        ;;
    test)
        shift
        setup
        log "running the test suite"
        exec "$PY" -m pytest "$@"
        ;;
    torch-choice)
        # What setup would install for torch here, installing nothing: pip's arguments on stdout, why on stderr.
        TORCH_SPEC="$(locked_torch)"
        if ! torch_choice "$([ "${2:-}" = "--cuda" ] && echo cuda)"; then log "$CHOICE_WHY"; exit 1; fi
        log "$CHOICE_WHY"
        echo "${CHOICE[*]}"
        ;;
    -h|--help|help)
        awk 'NR > 1 && /^set -euo/ { exit } NR > 1' "$0"
        ;;
    *)
        # On a CUDA GPU the default run trains there; after it, Python offers the gpu profile (its pilot first,
        # then its trainings, evaluations, looped decoders and GPU-hours: infiloop/experiments/cost/command.py gpu_offer).
        if wants_cuda_build "$@"; then WANT_CUDA=1; fi
        setup
        exec "$PY" -m infiloop reproduce "$@"
        ;;
esac
