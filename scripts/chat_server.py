"""Serve a GGUF chat model on an OpenAI-compatible HTTP API with xllamacpp (llama.cpp's server, in-process).

Run by scripts/chat_server.sh; blocks until killed. Arguments: GGUF path, port, served model name, threads.
"""

import signal
import sys
import threading

import xllamacpp


def serve(model_path: str, port: int, alias: str, threads: int) -> None:
    """Start the server on 127.0.0.1 and wait; llama.cpp's own threads answer the requests."""
    params = xllamacpp.CommonParams()
    params.model.path = model_path
    params.model_alias = {alias}
    params.hostnames = ["127.0.0.1"]
    params.port = port
    params.n_ctx = 4096
    params.n_parallel = 1
    # One thread: on a shared 2-core machine two collapse to about 1 token/s under load.
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    server = xllamacpp.Server(params)
    print(f"listening on {server.listening_address} as {alias!r}", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait()


if __name__ == "__main__":
    serve(sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]))
