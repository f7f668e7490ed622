// The llama.cpp peer: runs the prebuilt llama.cpp of the npm package node-llama-cpp to
// compute reference data for hedge's tests. Run it through scripts/llama_cpp_peer.sh, which
// installs the package under build/llama-cpp-peer/.
//
//   tokenize MODEL.gguf TEXTS.jsonl   one JSON object per line in: {"name": ..., "text": ...}
//                                     or {"name": ..., "base64": ...} for bytes that are not
//                                     valid UTF-8; one line out per text:
//                                     {"name": ..., "ids": [...]}, the ids of llama_tokenize
//                                     with add_special = false and parse_special = false
//                                     (no BOS: with add_special it is BOS followed by these).
//   generate MODEL.gguf PROMPT N      loads the model with its weights (CPU, 1 thread) and
//                                     prints the N token ids llama.cpp generates greedily
//                                     (argmax) after BOS and PROMPT's tokens, on one line.
//
// Each subcommand is one entry of `commands`: (model, args) -> Promise<void>, the model
// loaded by `loadModel` (a generate subcommand loads it with weights and a context).
import {spawnSync} from "node:child_process";
import {readFileSync} from "node:fs";
import {createRequire} from "node:module";
import path from "node:path";
import {fileURLToPath, pathToFileURL} from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const require = createRequire(path.join(root, "build/llama-cpp-peer/package.json"));
const {getLlama, LlamaLogLevel} = await import(pathToFileURL(require.resolve("node-llama-cpp")).href);

function usage() {
    process.stderr.write("usage: llama_cpp_peer.mjs tokenize MODEL.gguf TEXTS.jsonl | detokenize MODEL.gguf IDS.jsonl | generate MODEL.gguf PROMPT N\n");
    process.exit(2);
}

async function loadModel(modelPath, {vocabOnly}) {
    const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error});
    return llama.loadModel({modelPath, vocabOnly});
}

function readRecords(file) {
    return readFileSync(file, "utf8").split("\n").filter((line) => line.trim() !== "").map((line) => JSON.parse(line));
}

/// Ids of texts given as bytes, from the byte-exact helper the shell script builds.
function tokenizeBytes(modelPath, buffers) {
    const helper = process.env.HEDGE_LLAMA_CPP_TOKENIZE_BYTES;
    if (!helper) throw new Error("texts given as base64 need scripts/llama_cpp_peer.sh's tokenize-bytes helper");
    const input = buffers.map((b) => b.toString("hex")).join("\n") + "\n";
    const run = spawnSync(helper, [modelPath], {input, encoding: "utf8", maxBuffer: 1 << 30});
    if (run.status !== 0) throw new Error(`tokenize-bytes failed: ${run.stderr}`);
    return run.stdout.split("\n").slice(0, buffers.length).map((line) => (line === "" ? [] : line.split(" ").map(Number)));
}

const commands = {
    async tokenize(args) {
        if (args.length !== 2) usage();
        const [modelPath, textsPath] = args;
        const model = await loadModel(modelPath, {vocabOnly: true});
        const records = readRecords(textsPath);
        const bytes = records.map((r) => (r.base64 !== undefined ? Buffer.from(r.base64, "base64") : Buffer.from(r.text, "utf8")));
        const fromNode = records.map((r) => (r.base64 !== undefined ? null : Array.from(model.tokenize(r.text, false))));
        // The helper sees every text, so the two paths into the same libllama are checked
        // against each other where both apply.
        const fromHelper = process.env.HEDGE_LLAMA_CPP_TOKENIZE_BYTES ? tokenizeBytes(modelPath, bytes) : null;
        records.forEach((r, i) => {
            const ids = fromNode[i] ?? fromHelper[i];
            if (fromHelper && fromNode[i] && fromHelper[i].join(" ") !== fromNode[i].join(" "))
                throw new Error(`text ${r.name}: node-llama-cpp and tokenize-bytes disagree`);
            process.stdout.write(JSON.stringify({name: r.name, ids}) + "\n");
        });
        await model.dispose();
    },
};

commands.generate = async (args) => {
    if (args.length !== 3) usage();
    const [modelPath, prompt, count] = args;
    const n = Number(count);
    const model = await loadModel(modelPath, {vocabOnly: false});
    const context = await model.createContext({contextSize: Math.max(64, n + 64), threads: 1});
    const sequence = context.getSequence();
    const input = [model.tokens.bos, ...Array.from(model.tokenize(prompt, false))];
    const ids = [];
    for await (const token of sequence.evaluate(input, {temperature: 0})) {
        ids.push(token);
        if (ids.length >= n) break;
    }
    process.stdout.write(ids.join(" ") + "\n");
    await context.dispose();
    await model.dispose();
};

// bench MODEL.gguf THREADS N P...   times llama.cpp on MODEL at THREADS threads (CPU, a
//                                   context of 1024 positions, batches of 512): a greedy
//                                   decode of N tokens from BOS (positions 0 .. N-1, each
//                                   token's logits and sampling included), then for each P a
//                                   prefill of P tokens (BOS, then the fixed pseudo-random ids
//                                   bench/model/forward_bench.cpp uses) into an empty
//                                   sequence; one JSON line: decode and prefill tok/s (of
//                                   wall time, and of the process's CPU time) and the
//                                   process's resident set after decoding.
commands.bench = async (args) => {
    if (args.length < 4) {
        process.stderr.write("usage: llama_cpp_peer.mjs bench MODEL.gguf THREADS DECODE_TOKENS PREFILL_TOKENS...\n");
        process.exit(2);
    }
    const [modelPath, threadsArg, decodeArg, ...prefillArgs] = args;
    const threads = Number(threadsArg);
    const decodeTokens = Number(decodeArg);
    const prefills = prefillArgs.map(Number);
    // maxThreads 0: the context's thread count is the one used, not a share of a budget.
    const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error, maxThreads: 0});
    const model = await llama.loadModel({modelPath});
    const context = await model.createContext({contextSize: 1024, batchSize: 512, threads, sequences: 1});
    const sequence = context.getSequence();
    const bos = model.tokens.bos;
    // yieldEogToken: a random model's greedy ids may reach an end-of-generation id, which
    // would otherwise end the loop early.
    const decode = async (n) => {
        let count = 0;
        for await (const token of sequence.evaluate([bos], {temperature: 0, yieldEogToken: true})) {
            if (++count >= n) break;
        }
        if (count !== n) throw new Error(`decoded ${count} tokens, not ${n}`);
    };
    // CPU seconds of the whole process (every thread), beside the wall clock: on a machine
    // shared with other work the wall clock also counts the time others held the cores.
    const cpuSeconds = (since) => {
        const used = process.cpuUsage(since);
        return (used.user + used.system) / 1e6;
    };
    await decode(1);  // maps the weights' pages in before the clock runs
    await sequence.clearHistory();
    let start = performance.now();
    let cpuStart = process.cpuUsage();
    await decode(decodeTokens);
    const decodeSeconds = (performance.now() - start) / 1000;
    const decodeCpuSeconds = cpuSeconds(cpuStart);
    const rss = process.memoryUsage().rss;
    const vocabulary = model.fileInfo.metadata.tokenizer.ggml.tokens.length;
    const prefill = {};
    const prefillCpu = {};
    for (const p of prefills) {
        const tokens = [bos];
        let seed = 12345;
        for (let i = 1; i < p; ++i) {
            seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0;
            tokens.push(3 + ((seed >>> 8) % (vocabulary - 3)));
        }
        await sequence.clearHistory();
        start = performance.now();
        cpuStart = process.cpuUsage();
        await sequence.evaluateWithoutGeneratingNewTokens(tokens);
        prefill[p] = p / ((performance.now() - start) / 1000);
        prefillCpu[p] = p / cpuSeconds(cpuStart);
    }
    process.stdout.write(JSON.stringify({threads: context.currentThreads, decode_tokens: decodeTokens,
        decode_tok_per_s: decodeTokens / decodeSeconds, decode_tok_per_cpu_s: decodeTokens / decodeCpuSeconds,
        prefill_tok_per_s: prefill, prefill_tok_per_cpu_s: prefillCpu, rss_bytes: rss}) + "\n");
    await context.dispose();
    await model.dispose();
};

// batch MODEL.gguf THREADS N S...   times llama.cpp's batched decode at THREADS threads: for
//                                   each S, a context of S sequences, each decoding N tokens
//                                   greedily from BOS at once (node-llama-cpp puts the
//                                   sequences' tokens of a step into one llama_decode batch,
//                                   as llama.cpp's server does with its slots); one JSON line:
//                                   aggregate tok/s (S x N tokens over the wall time) per S.
commands.batch = async (args) => {
    if (args.length < 4) {
        process.stderr.write("usage: llama_cpp_peer.mjs batch MODEL.gguf THREADS DECODE_TOKENS SEQUENCES...\n");
        process.exit(2);
    }
    const [modelPath, threadsArg, decodeArg, ...sequenceArgs] = args;
    const threads = Number(threadsArg);
    const decodeTokens = Number(decodeArg);
    const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error, maxThreads: 0});
    const model = await llama.loadModel({modelPath});
    const bos = model.tokens.bos;
    const result = {};
    for (const count of sequenceArgs.map(Number)) {
        const context = await model.createContext({contextSize: 256 * count, batchSize: 512, threads, sequences: count});
        const sequences = Array.from({length: count}, () => context.getSequence());
        const decode = async (sequence, n) => {
            let done = 0;
            for await (const token of sequence.evaluate([bos], {temperature: 0})) {
                if (++done >= n) break;
            }
        };
        await Promise.all(sequences.map((s) => decode(s, 1)));  // pages in, as the bench does
        await Promise.all(sequences.map((s) => s.clearHistory()));
        const start = performance.now();
        await Promise.all(sequences.map((s) => decode(s, decodeTokens)));
        result[count] = count * decodeTokens / ((performance.now() - start) / 1000);
        await context.dispose();
    }
    process.stdout.write(JSON.stringify({threads, decode_tokens: decodeTokens, batch_tok_per_s: result}) + "\n");
    await model.dispose();
};

// detokenize MODEL.gguf IDS.jsonl   one JSON object per line in: {"name": ..., "ids": [...]};
//                                   one line out per object: {"name": ..., "text": ...,
//                                   "special": ...}, llama_detokenize's text of the ids with
//                                   remove_special = false and unparse_special = false / true
//                                   (ids whose text is valid UTF-8: a JavaScript string
//                                   cannot carry other bytes).
commands.detokenize = async (args) => {
    if (args.length !== 2) usage();
    const [modelPath, idsPath] = args;
    const model = await loadModel(modelPath, {vocabOnly: true});
    for (const r of readRecords(idsPath)) {
        process.stdout.write(JSON.stringify({name: r.name, text: model.detokenize(r.ids, false),
            special: model.detokenize(r.ids, true)}) + "\n");
    }
    await model.dispose();
};

const [command, ...args] = process.argv.slice(2);
if (!commands[command]) usage();
await commands[command](args);
