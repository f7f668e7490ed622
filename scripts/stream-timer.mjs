// A streamed /v1/completions request, timed as a client sees it (node:http, keep-alive,
// TCP_NODELAY; fetch's undici added 10-30 ms of its own here). Prints
// "ttft_ms tok_s last_ms tokens prompt_tokens". The same request runs twice on one keep-alive
// connection and the second is timed: a fresh Node process takes milliseconds over its first
// response. Used by scripts/compare-server.sh and scripts/compare-gateway.sh.
// usage: node stream-timer.mjs URL BODY
import http from "node:http";
const [url, body] = process.argv.slice(2);
const agent = new http.Agent({keepAlive: true, maxSockets: 1});
const send = (path, method, payload, onData) => new Promise((resolve, reject) => {
  const req = http.request(new URL(path, url), {method, agent,
    headers: payload ? {"Content-Type": "application/json", "Content-Length": Buffer.byteLength(payload)} : {}},
    (res) => { res.setEncoding("utf8"); res.on("data", onData); res.on("end", resolve); });
  req.on("socket", (s) => s.setNoDelay(true));
  req.on("error", reject);
  req.end(payload);
});
let first = null, last = null, buffer = "", usage = null, start = 0;
const timed = () => send("/v1/completions", "POST", body, (data) => {
  const now = performance.now();
  buffer += data;
  let at;
  while ((at = buffer.indexOf("\n\n")) >= 0) {
    const event = buffer.slice(0, at); buffer = buffer.slice(at + 2);
    if (!event.startsWith("data: {")) continue;
    const chunk = JSON.parse(event.slice(6));
    if (chunk.usage) usage = chunk.usage;
    if (chunk.choices.length && chunk.choices[0].text) { first ??= now; last = now; }
  }
});
await timed();  // warms the client (its first response costs it milliseconds) and the connection
first = last = null;
start = performance.now();
await timed();
agent.destroy();
const n = usage.completion_tokens;
const rate = last > first ? ((n - 1) / ((last - first) / 1000)).toFixed(1) : "nan";
console.log(`${(first - start).toFixed(3)} ${rate} ${(last - start).toFixed(3)} ${n} ${usage.prompt_tokens}`);
