#!/usr/bin/env python3
# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Stand-in for an OpenAI-compatible inference server (vLLM-like), standard library only.

Part of examples/inference (docs/extending.md). Replace it with the real server (for example
``vllm serve <model> --port <port>``); nothing in the collection knows this script exists.

* Listens on ``--host``/``--port`` at once, but ``GET /health`` answers 503 while the "model" loads
  (``--load-seconds``) and 200 after ``Application startup complete.`` - so readiness must be probed over
  HTTP, not by the port being open.
* ``POST /v1/completions`` returns an OpenAI-style completion after ``--token-seconds`` per token.
* Prints vLLM-style log lines (``INFO MM-DD hh:mm:ss [file.py:line] ...`` and uvicorn's access lines) to stdout.
* SIGTERM: ``Shutting down`` and exit 0.

Faults, for tests and demos: the environment variable ``STANDIN_FAULTS`` is a JSON object mapping a node name
(the ``CVS_NODE`` environment variable, else the host name) to ``oom_at_load`` (the engine dies while loading)
or ``oom_after:N`` (the engine dies on request N+1). A dying engine logs an ERROR line, a Python traceback and
``torch.OutOfMemoryError: HIP out of memory ...``, answers 500 and exits with status 1.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

STATE = {"ready": False, "dead": False, "served": 0, "tokens": 0}
LOCK = threading.Lock()


def log(level: str, where: str, message: str) -> None:
    stamp = time.strftime("%m-%d %H:%M:%S")
    print(f"{level} {stamp} [{where}] {message}", flush=True)


def access(client: str, request: str, status: int, phrase: str) -> None:
    print(f'INFO:     {client} - "{request}" {status} {phrase}', flush=True)


def fault_for_this_node() -> str:
    try:
        faults = json.loads(os.environ.get("STANDIN_FAULTS") or "{}")
    except ValueError:
        return ""
    node = os.environ.get("CVS_NODE") or socket.gethostname()
    return str(faults.get(node, "")) if isinstance(faults, dict) else ""


def engine_dies(where: str) -> None:
    """Log what vLLM logs when the engine core runs out of GPU memory, then exit 1."""
    STATE["dead"] = True
    log("ERROR", "core.py:517", "EngineCore encountered a fatal error.")
    print("Traceback (most recent call last):", flush=True)
    print('  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 508, in run_engine_core')
    print(f'  File "/usr/local/lib/python3.12/dist-packages/vllm/worker/model_runner.py", line 1742, in {where}')
    print(
        "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
        "191.98 GiB of which 1.06 GiB is free.",
        flush=True,
    )
    log("ERROR", "async_llm.py:420", "AsyncLLM output_handler failed.")
    print("INFO:     Shutting down", flush=True)
    sys.stdout.flush()
    os._exit(1)


class Handler(BaseHTTPRequestHandler):
    server_version = "standin-vllm/0.1"

    def log_message(self, format: str, *args: object) -> None:
        pass  # access lines are printed by the handlers, uvicorn-style

    def _reply(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        phrases = {200: "OK", 404: "Not Found", 500: "Internal Server Error", 503: "Service Unavailable"}
        request = self.requestline.rsplit(" ", 1)[0] + " HTTP/1.1"
        access(f"{self.client_address[0]}:{self.client_address[1]}", request, status, phrases.get(status, ""))

    def do_GET(self) -> None:
        if self.path == "/health":
            ok = STATE["ready"] and not STATE["dead"]
            self._reply(200 if ok else 503, {} if ok else {"error": "engine not ready"})
        elif self.path == "/v1/models":
            self._reply(200, {"object": "list", "data": [{"id": ARGS.model, "object": "model"}]})
        else:
            self._reply(404, {"error": "not found"})

    def do_POST(self) -> None:
        if self.path != "/v1/completions":
            self._reply(404, {"error": "not found"})
            return
        length = int(self.headers.get("Content-Length") or 0)
        try:
            req = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            self._reply(400, {"error": "invalid JSON"})
            return
        if not STATE["ready"] or STATE["dead"]:
            self._reply(503, {"error": "engine not ready"})
            return
        with LOCK:
            STATE["served"] += 1
            number = STATE["served"]
        fault = fault_for_this_node()
        if fault.startswith("oom_after:") and number > int(fault.split(":", 1)[1]):
            self._reply(500, {"error": "EngineDeadError"})
            engine_dies("execute_model")
        tokens = max(1, int(req.get("max_tokens") or 16))
        time.sleep(tokens * ARGS.token_seconds)
        with LOCK:
            STATE["tokens"] += tokens
        prompt = str(req.get("prompt") or "")
        self._reply(
            200,
            {
                "id": f"cmpl-{number}",
                "object": "text_completion",
                "model": ARGS.model,
                "choices": [{"index": 0, "text": " lorem" * tokens, "finish_reason": "length"}],
                "usage": {
                    "prompt_tokens": len(prompt.split()),
                    "completion_tokens": tokens,
                    "total_tokens": len(prompt.split()) + tokens,
                },
            },
        )


def stats_loop() -> None:
    last = 0
    while True:
        time.sleep(ARGS.stats_seconds)
        with LOCK:
            tokens = STATE["tokens"]
        log(
            "INFO",
            "loggers.py:118",
            f"Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: "
            f"{(tokens - last) / ARGS.stats_seconds:.1f} tokens/s, Running: 0 reqs, Waiting: 0 reqs, "
            "GPU KV cache usage: 0.1%, Prefix cache hit rate: 0.0%",
        )
        last = tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--host", default="0.0.0.0")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--model", default="meta-llama/Llama-3.1-8B-Instruct")
    parser.add_argument("--load-seconds", type=float, default=2.0)
    parser.add_argument("--token-seconds", type=float, default=0.001)
    parser.add_argument("--stats-seconds", type=float, default=10.0)
    global ARGS
    ARGS = parser.parse_args()

    def on_term(signum: int, frame: object) -> None:
        print("INFO:     Shutting down", flush=True)
        print(f"INFO:     Finished server process [{os.getpid()}]", flush=True)
        os._exit(0)

    signal.signal(signal.SIGTERM, on_term)
    log("INFO", "api_server.py:1287", "vLLM API server version 0.9.1 (cvs.cluster example stand-in)")
    log("INFO", "api_server.py:1288", f"args: Namespace(host='{ARGS.host}', port={ARGS.port}, model='{ARGS.model}')")
    httpd = ThreadingHTTPServer((ARGS.host, ARGS.port), Handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    log("INFO", "gpu_model_runner.py:1595", f"Starting to load model {ARGS.model}...")
    time.sleep(ARGS.load_seconds / 2)
    if fault_for_this_node() == "oom_at_load":
        engine_dies("load_model")
    time.sleep(ARGS.load_seconds / 2)
    log("INFO", "gpu_model_runner.py:1624", f"Model loading took 14.99 GiB and {ARGS.load_seconds:.6f} seconds")
    log("INFO", "api_server.py:1351", f"Starting vLLM API server 0 on http://{ARGS.host}:{ARGS.port}")
    print(f"INFO:     Started server process [{os.getpid()}]", flush=True)
    print("INFO:     Waiting for application startup.", flush=True)
    print("INFO:     Application startup complete.", flush=True)
    STATE["ready"] = True
    stats_loop()


ARGS = argparse.Namespace()

if __name__ == "__main__":
    main()
