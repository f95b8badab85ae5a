"""A tiny OpenAI-compatible chat-completions server for tests.

It answers with `example_agents.scripts.next_turn`, the same script the in-process
scripted model uses, so tests can drive the real OpenAI client without a network.
`GET /_requests` lists the request bodies received so far; `DELETE /_requests` clears them.

Run it alone with `python -m tests.fakes.openai_server PORT`.
"""

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from example_agents.scripts import next_turn, tool_names


class FakeOpenAIServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int]) -> None:
        super().__init__(address, Handler)
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()  # handlers run on their own threads


class Handler(BaseHTTPRequestHandler):
    server: FakeOpenAIServer

    def do_POST(self) -> None:
        if self.path.rstrip("/") != "/v1/chat/completions":
            return self._send(404, {"error": {"message": f"No route {self.path}"}})
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        with self.server.lock:
            self.server.requests.append(body)
            number = len(self.server.requests)
        turn = next_turn(body["messages"], tool_names(body.get("tools", [])))
        message: dict[str, Any] = {"role": "assistant", "content": turn["content"] or None}
        if turn["tool_calls"]:
            message["tool_calls"] = [
                {
                    "id": call["id"],
                    "type": "function",
                    "function": {"name": call["name"], "arguments": json.dumps(call["args"])},
                }
                for call in turn["tool_calls"]
            ]
        finish_reason = "tool_calls" if turn["tool_calls"] else "stop"
        completion = {
            "id": f"chatcmpl-{number}",
            "created": 0,
            "model": body.get("model", "fake"),
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        }
        if body.get("stream"):
            return self._stream(completion, message, finish_reason)
        choice = {"index": 0, "message": message, "finish_reason": finish_reason, "logprobs": None}
        self._send(200, {**completion, "object": "chat.completion", "choices": [choice]})

    def do_GET(self) -> None:
        if self.path != "/_requests":
            return self._send(404, {"error": {"message": f"No route {self.path}"}})
        with self.server.lock:
            self._send(200, list(self.server.requests))

    def do_DELETE(self) -> None:
        if self.path != "/_requests":
            return self._send(404, {"error": {"message": f"No route {self.path}"}})
        with self.server.lock:
            self.server.requests.clear()
        self._send(200, [])

    def _stream(self, completion: dict[str, Any], message: dict[str, Any], finish: str) -> None:
        # The whole turn goes in one chunk; a tool call's delta needs its index.
        for index, call in enumerate(message.get("tool_calls", [])):
            call["index"] = index
        chunk = {**completion, "object": "chat.completion.chunk"}
        chunk["choices"] = [{"index": 0, "delta": message, "finish_reason": finish}]
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        self.wfile.write(f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode())

    def _send(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output quiet


def start(port: int = 0) -> tuple[FakeOpenAIServer, str]:
    """Serve on 127.0.0.1 in a daemon thread; stop it with `server.shutdown()`."""
    server = FakeOpenAIServer(("127.0.0.1", port))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


if __name__ == "__main__":
    server = FakeOpenAIServer(("127.0.0.1", int(sys.argv[1]) if len(sys.argv) > 1 else 0))
    print(f"Serving on http://127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()
