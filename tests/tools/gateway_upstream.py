#!/usr/bin/env python3
"""A fault-injecting, recording upstream for the gateway tests: it stands between hedge-server's
gateway and a real hedge-server (the cloud), records every request it receives, and applies
the next fault of its script to each request: ok (forward as is), 500, 429 (Retry-After: 1),
garbage (a 200 whose SSE data is not JSON), cutN (forward the stream, cut it after N events),
slow (forward the stream, 50 ms between events), down (close the connection at once), and
answers of its own for what the edge cannot serve: tools (a get_weather tool call, streamed in
four events or whole), toolcutN (that stream cut after N events), echo (the last message's
text as the answer, streamed or whole: placeholders come back as the upstream saw them).

usage: gateway_upstream.py PORT_FILE RECORD_FILE CLOUD_URL FAULT[,FAULT...]
Writes its port to PORT_FILE once listening; every request's head and body are appended to
RECORD_FILE. After the script's last fault, every request is forwarded as it is."""
import http.client
import json
import socketserver
import sys
import threading
import time
import urllib.parse

port_file, record_file, cloud_url, script = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
faults = [f for f in script.split(",") if f]
lock = threading.Lock()
cloud = urllib.parse.urlparse(cloud_url)


def own_answer(fault, body):
    """The events (streamed) or the body (whole) of an answer the upstream makes itself."""
    request = json.loads(body)
    head = {"id": "chatcmpl-upstream", "object": "chat.completion.chunk", "created": 1, "model": request.get("model", "")}
    if fault == "echo":
        text = request["messages"][-1]["content"]
        if isinstance(text, list):
            text = "".join(p.get("text", "[" + p["type"] + "]") for p in text)
        if not request.get("stream"):
            return {**head, "object": "chat.completion", "choices": [{"index": 0, "message": {
                "role": "assistant", "content": text}, "finish_reason": "stop"}]}
        deltas = [{"role": "assistant", "content": ""}] + [{"content": text[i:i + 5]} for i in range(0, len(text), 5)]
        finish = "stop"
    else:
        call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": ""}}
        if not request.get("stream"):
            call["function"]["arguments"] = '{"city": "Paris"}'
            del call["index"]
            return {**head, "object": "chat.completion", "choices": [{"index": 0, "message": {
                "role": "assistant", "content": None, "tool_calls": [call]}, "finish_reason": "tool_calls"}]}
        deltas = [{"role": "assistant", "content": None, "tool_calls": [call]},
                  {"tool_calls": [{"index": 0, "function": {"arguments": '{"city": '}}]},
                  {"tool_calls": [{"index": 0, "function": {"arguments": '"Paris"}'}}]}]
        finish = "tool_calls"
    events = [{**head, "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas]
    events.append({**head, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    return events


def next_fault():
    with lock:
        return faults.pop(0) if faults else "ok"


class Handler(socketserver.StreamRequestHandler):
    def handle(self):
        while True:
            line = self.rfile.readline(65536)
            if not line:
                return
            method, target, _ = line.decode("latin-1").split(" ", 2)
            headers, length = [], 0
            while True:
                h = self.rfile.readline(65536)
                if h in (b"\r\n", b"\n", b""):
                    break
                headers.append(h.decode("latin-1"))
                name, _, value = h.decode("latin-1").partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value.strip())
            body = self.rfile.read(length) if length else b""
            with lock, open(record_file, "ab") as f:
                f.write(line + "".join(headers).encode("latin-1") + b"\r\n" + body + b"\n----\n")
            fault = next_fault()
            if fault == "down":
                return
            if fault in ("500", "429"):
                payload = b'{"error":{"message":"injected","type":"server_error"}}'
                extra = "Retry-After: 1\r\n" if fault == "429" else ""
                self.wfile.write(f"HTTP/1.1 {fault} Injected\r\nContent-Type: application/json\r\n{extra}"
                                 f"Content-Length: {len(payload)}\r\n\r\n".encode() + payload)
                continue
            if fault == "garbage":
                payload = b"data: {this is not json\n\n"
                self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                                 + f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n".encode() + payload)
                return
            if fault in ("tools", "echo") or fault.startswith("toolcut"):
                answer = own_answer("tools" if fault.startswith("toolcut") else fault, body)
                if isinstance(answer, dict):
                    payload = json.dumps(answer).encode()
                    self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                     + f"Content-Length: {len(payload)}\r\n\r\n".encode() + payload)
                    continue
                cut = int(fault[7:]) if fault.startswith("toolcut") else len(answer) + 1
                self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n")
                for event in answer[:cut]:
                    self.wfile.write(b"data: " + json.dumps(event).encode() + b"\n\n")
                    self.wfile.flush()
                if cut > len(answer):
                    self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                return
            conn = http.client.HTTPConnection(cloud.hostname, cloud.port, timeout=30)
            conn.request(method, target, body, {"Content-Type": "application/json"})
            reply = conn.getresponse()
            if fault.startswith("cut") or fault == "slow":
                events = int(fault[3:]) if fault.startswith("cut") else 1 << 30
                self.wfile.write(f"HTTP/1.1 {reply.status} OK\r\nContent-Type: text/event-stream\r\n"
                                 "Connection: close\r\n\r\n".encode())
                buffered = b""
                while events > 0:
                    piece = reply.read1(65536)
                    if not piece:
                        break
                    buffered += piece
                    while events > 0 and b"\n\n" in buffered:
                        event, buffered = buffered.split(b"\n\n", 1)
                        self.wfile.write(event + b"\n\n")
                        self.wfile.flush()
                        events -= 1
                        if fault == "slow":
                            time.sleep(0.05)
                self.wfile.flush()
                conn.close()
                return
            data = reply.read()
            kind = reply.getheader("Content-Type", "application/json")
            self.wfile.write(f"HTTP/1.1 {reply.status} OK\r\nContent-Type: {kind}\r\n"
                             f"Content-Length: {len(data)}\r\n\r\n".encode() + data)
            conn.close()


class Server(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True


with Server(("127.0.0.1", 0), Handler) as server:
    with open(port_file, "w") as f:
        f.write(str(server.server_address[1]))
    server.serve_forever()
