"""An agentmesh tool worker in Python, written from docs/reference/workers.md.

Serves one tool, py.reverse: {"text": str, "delay_ms"?: int} -> {"reversed": str}. It registers with the catalog,
heartbeats, answers tool.invoke.py.reverse (queue group tool.py.reverse), sends started/heartbeat progress while a
call runs, and stops the calls of a run when the run is cancelled.

    pip install -r requirements.txt
    python3 worker.py --nats nats://127.0.0.1:4222 [--prefix agentmesh] [--ttl-ms 9000]
"""

import argparse
import asyncio
import json
import os
import random
import signal
import socket
import time

import nats

TOOL = "py.reverse"
SPEC = {
    "name": TOOL,
    "description": "Reverse a text (a worker written in Python)",
    "namespace": "py",
    "input_schema": {
        "type": "object",
        "properties": {
            "text": {"type": "string", "description": "the text to reverse"},
            "delay_ms": {"type": "integer", "minimum": 0, "maximum": 60000, "description": "wait this long first"},
        },
        "required": ["text"],
        "additionalProperties": False,
    },
    "output_schema": {
        "type": "object",
        "properties": {"reversed": {"type": "string"}},
        "required": ["reversed"],
    },
    "safety": {"read_only": True},
    "timeout_ms": 60000,
    "retry": {"max_attempts": 1, "timeout_ms": 60000, "retry_on": [], "backoff_ms": 0, "max_backoff_ms": 0, "jitter": 0},
    "idempotent": True,
    "loading": "always",
}
CANCEL_MEMORY_S = 60


def log(event, **fields):
    print(json.dumps({"event": event, **fields}), flush=True)


class ToolError(Exception):
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


def reverse(arguments):
    if not isinstance(arguments, dict) or not isinstance(arguments.get("text"), str):
        raise ToolError("invalid_arguments", "text: expected a string")
    delay = arguments.get("delay_ms", 0)
    if not isinstance(delay, int) or delay < 0 or delay > 60000:
        raise ToolError("invalid_arguments", "delay_ms: expected a whole number from 0 to 60000")
    return arguments["text"][::-1], delay / 1000


class Worker:
    def __init__(self, nc, prefix, ttl_ms):
        self.nc = nc
        self.prefix = prefix
        self.worker_id = f"py-{socket.gethostname()}-{os.getpid()}-{random.randrange(16**6):06x}"
        self.ttl_ms = ttl_ms
        self.tasks = set()  # every call being answered (asyncio keeps only weak references to tasks)
        self.running = {}  # run_id -> set of asyncio tasks
        self.cancelled = {}  # run_id -> when its cancel arrived

    async def register(self):
        body = {"worker_id": self.worker_id, "ttl_ms": self.ttl_ms, "tools": [SPEC]}
        delay = 0.2
        while True:
            try:
                reply = await self.nc.request(f"{self.prefix}.catalog.register", json.dumps(body).encode(), timeout=3)
                answer = json.loads(reply.data)
                if "error" in answer:
                    raise RuntimeError(answer["error"]["message"])
                self.ttl_ms = answer["ttl_ms"]
                log("registered", worker_id=self.worker_id, accepted=answer["accepted"], rejected=answer["rejected"])
                return
            except Exception as error:  # the catalog may not be up yet
                log("register_retry", error=str(error))
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5)

    async def heartbeat(self):
        while True:
            await asyncio.sleep(self.ttl_ms / 3000)
            try:
                reply = await self.nc.request(
                    f"{self.prefix}.catalog.heartbeat", json.dumps({"worker_id": self.worker_id}).encode(), timeout=3
                )
                if json.loads(reply.data).get("known") is False:
                    log("forgotten")
                    await self.register()
            except Exception as error:
                log("heartbeat_failed", error=str(error))

    async def deregister(self):
        try:
            await self.nc.request(
                f"{self.prefix}.catalog.deregister", json.dumps({"worker_id": self.worker_id}).encode(), timeout=1
            )
        except Exception:
            pass

    async def on_invoke(self, msg):
        task = asyncio.create_task(self.answer(msg))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def answer(self, msg):
        try:
            call = json.loads(msg.data)
            call_id, run_id = call["call_id"], call["run_id"]
        except Exception as error:
            payload = {"error": {"code": "invalid_message", "message": f"not a ToolInvocation: {error}", "retryable": False}}
            await self.nc.publish(msg.reply, json.dumps(payload).encode(), headers={"am-status": "error"})
            return
        started = time.monotonic()
        task = asyncio.current_task()
        self.running.setdefault(run_id, set()).add(task)
        beats = asyncio.create_task(self.progress(call)) if call.get("progress_subject") else None
        try:
            outcome = await self.execute(call)
        except asyncio.CancelledError:
            log("cancelled", call_id=call_id, run_id=run_id)
            outcome = self.failure("cancelled", f"the call was cancelled with its run {run_id}")
        finally:
            if beats is not None:
                beats.cancel()
            self.running.get(run_id, set()).discard(task)
        outcome.update(call_id=call_id, tool=TOOL, worker_id=self.worker_id, attempts=1)
        outcome["elapsed_ms"] = (time.monotonic() - started) * 1000
        await msg.respond(json.dumps(outcome).encode())

    async def execute(self, call):
        if call["run_id"] in self.cancelled:
            raise asyncio.CancelledError()
        try:
            text, delay_s = reverse(call.get("arguments"))
        except ToolError as error:
            return self.failure(error.code, str(error))
        if delay_s > 0:
            await asyncio.sleep(delay_s)
        output = {"reversed": text}
        preview = json.dumps(output, separators=(",", ":"))
        limit = call.get("max_output_bytes")
        if limit is not None:
            preview = preview.encode()[:limit].decode("utf-8", "ignore")
        return {"is_error": False, "output": output, "preview": preview}

    def failure(self, code, message):
        error = {"code": code, "message": message, "retryable": False}
        return {"is_error": True, "error": error, "preview": f"error [{code}]: {message}"}

    async def progress(self, call):
        notice = {"call_id": call["call_id"], "tool": TOOL, "worker_id": self.worker_id}
        kind = "started"
        while True:
            await self.nc.publish(call["progress_subject"], json.dumps({"kind": kind, **notice}).encode())
            kind = "heartbeat"
            await asyncio.sleep(1)

    async def on_cancel(self, msg):
        run_id = msg.subject[len(f"{self.prefix}.runs.") : -len(".cancel")]
        now = time.monotonic()
        self.cancelled = {r: t for r, t in self.cancelled.items() if now - t < CANCEL_MEMORY_S}
        self.cancelled[run_id] = now
        for task in list(self.running.get(run_id, ())):
            task.cancel()


async def main():
    parser = argparse.ArgumentParser(description="agentmesh tool worker in Python: py.reverse")
    parser.add_argument("--nats", default=os.environ.get("NATS_URL", "nats://127.0.0.1:4222"))
    parser.add_argument("--prefix", default=os.environ.get("AGENTMESH_PREFIX", "agentmesh"))
    parser.add_argument("--ttl-ms", type=int, default=9000, help="registration TTL; heartbeats every third of it")
    args = parser.parse_args()
    nc = await nats.connect(args.nats, name="agentmesh-python-worker")
    worker = Worker(nc, args.prefix, args.ttl_ms)
    await nc.subscribe(f"{args.prefix}.tool.invoke.{TOOL}", queue=f"tool.{TOOL}", cb=worker.on_invoke)
    await nc.subscribe(f"{args.prefix}.runs.*.cancel", cb=worker.on_cancel)
    await nc.flush()
    await worker.register()
    beating = asyncio.create_task(worker.heartbeat())
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    log("ready", worker_id=worker.worker_id, tool=TOOL)
    await stop.wait()
    beating.cancel()
    await worker.deregister()
    await nc.drain()


if __name__ == "__main__":
    asyncio.run(main())
