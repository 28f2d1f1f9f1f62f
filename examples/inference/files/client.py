#!/usr/bin/env python3
# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Stand-in for a serving benchmark client (vLLM benchmark_serving-like), standard library only.

Part of examples/inference (docs/extending.md). Replace it with the real client (for example
``vllm bench serve ... --save-result --result-filename <path>``); nothing in the collection knows this script exists.

Sends ``--num-prompts`` completion requests spread round-robin over ``--servers`` (one worker per server),
prints a per-request progress line, a failed request as a ``WARNING`` line, and the usual
``Serving Benchmark Result`` table; then writes ``--result`` (JSON) atomically: the file appears complete or not
at all, so a watcher that waits for it never reads half of it. Exit status 0 when the benchmark ran (failed
requests are counted in the result, not fatal), 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

LOCK = threading.Lock()


def say(message: str) -> None:
    with LOCK:
        print(message, flush=True)


def request(server: str, model: str, number: int, max_tokens: int, timeout: float) -> tuple[bool, float, int, str]:
    """One completion request: (ok, latency seconds, completion tokens, error text)."""
    body = json.dumps({"model": model, "prompt": f"benchmark prompt {number}", "max_tokens": max_tokens}).encode()
    req = urllib.request.Request(
        server.rstrip("/") + "/v1/completions", data=body, headers={"Content-Type": "application/json"}
    )
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # nodes talk to each other directly
    start = time.monotonic()
    try:
        with opener.open(req, timeout=timeout) as resp:
            reply = json.loads(resp.read() or b"{}")
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return False, time.monotonic() - start, 0, str(getattr(exc, "reason", exc) or exc)
    tokens = int((reply.get("usage") or {}).get("completion_tokens") or 0)
    return True, time.monotonic() - start, tokens, ""


def percentile(values: list[float], pct: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(pct / 100.0 * (len(ordered) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--servers", required=True, help="comma-separated base URLs, e.g. http://10.0.0.1:8000")
    parser.add_argument("--model", default="meta-llama/Llama-3.1-8B-Instruct")
    parser.add_argument("--num-prompts", type=int, default=30)
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--request-interval", type=float, default=0.0, help="pause of each worker between requests")
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--result", required=True, help="result JSON file to write")
    args = parser.parse_args()
    servers = [s for s in args.servers.split(",") if s]
    if not servers or args.num_prompts < 1:
        print("client.py: need at least one server and one prompt", file=sys.stderr)
        return 2

    say(f"Namespace(backend='openai', servers={servers}, model='{args.model}', num_prompts={args.num_prompts})")
    say("Starting main benchmark run...")
    latencies: list[float] = []
    per_server = {s: {"completed": 0, "failed": 0} for s in servers}
    totals = {"completed": 0, "failed": 0, "tokens": 0}

    def worker(server: str, numbers: list[int]) -> None:
        for n in numbers:
            ok, latency, tokens, error = request(server, args.model, n, args.max_tokens, args.timeout)
            with LOCK:
                key = "completed" if ok else "failed"
                per_server[server][key] += 1
                totals[key] += 1
                totals["tokens"] += tokens
                if ok:
                    latencies.append(latency)
                done = totals["completed"] + totals["failed"]
            if ok:
                say(f"request {n} to {server}: {tokens} tokens in {latency * 1000:.1f} ms [{done}/{args.num_prompts}]")
            else:
                say(f"WARNING request {n} to {server} failed: {error} [{done}/{args.num_prompts}]")
            time.sleep(args.request_interval)

    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=len(servers)) as pool:
        jobs = [pool.submit(worker, s, list(range(i, args.num_prompts, len(servers)))) for i, s in enumerate(servers)]
    for job in jobs:
        job.result()  # a worker that crashed raises here (a traceback in the log, no result file)
    duration = max(time.monotonic() - started, 1e-9)

    result = {
        "date": time.strftime("%Y%m%d-%H%M%S"),
        "model": args.model,
        "servers": per_server,
        "num_prompts": args.num_prompts,
        "completed": totals["completed"],
        "failed": totals["failed"],
        "duration": round(duration, 3),
        "total_output_tokens": totals["tokens"],
        "request_throughput": round(totals["completed"] / duration, 3),
        "output_throughput": round(totals["tokens"] / duration, 3),
        "mean_latency_ms": round(statistics.mean(latencies) * 1000, 3) if latencies else None,
        "p50_latency_ms": round(percentile(latencies, 50) * 1000, 3) if latencies else None,
        "p99_latency_ms": round(percentile(latencies, 99) * 1000, 3) if latencies else None,
    }
    say("============ Serving Benchmark Result ============")
    say(f"{'Successful requests:':<40}{result['completed']:<10}")
    say(f"{'Failed requests:':<40}{result['failed']:<10}")
    say(f"{'Benchmark duration (s):':<40}{result['duration']:<10.2f}")
    say(f"{'Total generated tokens:':<40}{result['total_output_tokens']:<10}")
    say(f"{'Request throughput (req/s):':<40}{result['request_throughput']:<10.2f}")
    say(f"{'Output token throughput (tok/s):':<40}{result['output_throughput']:<10.2f}")
    say(f"{'Mean E2E Latency (ms):':<40}{result['mean_latency_ms'] or 0:<10.2f}")
    say(f"{'P99 E2E Latency (ms):':<40}{result['p99_latency_ms'] or 0:<10.2f}")
    say("==================================================")

    tmp = f"{args.result}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(result, fh, indent=2)
        fh.write("\n")
    os.replace(tmp, args.result)  # atomic: the watcher sees the whole file or none
    say(f"Saved the result to {args.result}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
