// The test twin: a real local model (a GGUF file, run on the CPU by node-llama-cpp) behind an
// OpenAI-compatible HTTP endpoint on loopback, answering the way MLX's and llama.cpp's servers
// do. KARL's tests, the twin benchmark and `scripts/twin-server.sh` start it; it is not part of
// the shipped binaries.
//
//   node tests/twin/server.mjs --model FILE.gguf [--host 127.0.0.1] [--port 0] [--context 4096]
//                              [--threads N] [--name NAME] [--runtime DIR] [--exit-on-stdin-eof]
// DIR (default $KARL_TWIN_RUNTIME, else ~/.cache/karl/twin-runtime) holds node-llama-cpp.
//
// Serves
//   GET  /v1/models             {"object":"list","data":[{"id":NAME,...}]}
//   POST /v1/chat/completions   messages, temperature, max_tokens, seed, stream,
//                               stream_options.include_usage; replies carry usage with
//                               prompt_tokens_details.cached_tokens (the prompt prefix the
//                               sequence already held, so prefix caching is measurable)
//   GET  /health                {"status":"ok"}
// When ready it prints one line to stdout: `listening http://HOST:PORT/v1 model NAME`.
// Requests run one at a time on one context sequence (a queue), like a single-slot
// llama.cpp server, so a stable prompt prefix is evaluated once.
//
// Bad input gets a 4xx with {"error":{"message":...,"type":...}}; nothing a client sends
// stops the server. It exits on SIGTERM/SIGINT or when its stdin closes (`--exit-on-stdin-eof`),
// so a test that dies does not leave a model running.

import http from "node:http";
import os from "node:os";
import path from "node:path";
import process from "node:process";
import { randomBytes } from "node:crypto";
import { pathToFileURL } from "node:url";

const args = parseArgs(process.argv.slice(2));
if (!args.model) {
    fail("usage: server.mjs --model FILE.gguf [--host H] [--port P] [--context N] [--threads N] [--name NAME]");
}
const HOST = args.host ?? "127.0.0.1";
const PORT = Number(args.port ?? 0);
const CONTEXT = Number(args.context ?? 4096);
// llama.cpp's default thread count oversubscribes small machines badly (a 20-token reply
// took a minute on 2 cores); one thread per spare core is fast and leaves room for the rest.
const THREADS = Number(args.threads ?? Math.max(1, Math.min(4, os.availableParallelism() - 1)));
const MAX_BODY = 4 << 20;
const MODEL_NAME = args.name ?? path.basename(args.model).replace(/\.gguf$/i, "");

// The runtime directory holds node_modules/node-llama-cpp (scripts/fetch-model.sh installs it).
const RUNTIME =
    args.runtime ??
    process.env.KARL_TWIN_RUNTIME ??
    path.join(process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), ".cache"), "karl", "twin-runtime");
let llamaCpp;
try {
    llamaCpp = await import(pathToFileURL(path.join(RUNTIME, "node_modules", "node-llama-cpp", "dist", "index.js")).href);
} catch (e) {
    fail(`cannot load node-llama-cpp from ${RUNTIME} (${e.message}); run scripts/fetch-model.sh, which installs it there`);
}
const { getLlama, LlamaCompletion, resolveChatWrapper, LlamaText } = llamaCpp;

const llama = await getLlama({ gpu: false, build: "never", logLevel: "error" });
let model;
try {
    model = await llama.loadModel({ modelPath: args.model });
} catch (e) {
    fail(`cannot load model ${args.model}: ${e.message}`);
}
const context = await model.createContext({ contextSize: CONTEXT, threads: THREADS, sequences: 1 });
const sequence = context.getSequence();
const completion = new LlamaCompletion({ contextSequence: sequence });
const wrapper = resolveChatWrapper(model);

// One generation at a time: each request waits for the one before it.
let queue = Promise.resolve();
function serialized(job) {
    const run = queue.then(job, job);
    queue = run.catch(() => {});
    return run;
}

const server = http.createServer((req, res) => {
    handle(req, res).catch((e) => {
        if (!res.headersSent) {
            sendError(res, 500, `twin server error: ${e.message}`, "server_error");
        } else {
            res.end();
        }
    });
});
server.listen(PORT, HOST, () => {
    const { port } = server.address();
    process.stdout.write(`listening http://${HOST}:${port}/v1 model ${MODEL_NAME}\n`);
});

for (const sig of ["SIGTERM", "SIGINT"]) {
    process.on(sig, () => shutdown(0));
}
if (args["exit-on-stdin-eof"]) {
    process.stdin.on("end", () => shutdown(0));
    process.stdin.on("error", () => shutdown(0));
    process.stdin.resume();
}

async function shutdown(code) {
    server.close();
    try {
        await llama.dispose();
    } catch {
        // Exiting anyway.
    }
    process.exit(code);
}

async function handle(req, res) {
    const url = new URL(req.url, "http://twin");
    const route = url.pathname.replace(/\/+$/, "");
    if (req.method === "GET" && (route === "/v1/models" || route === "/models")) {
        return sendJson(res, 200, {
            object: "list",
            data: [{ id: MODEL_NAME, object: "model", created: 0, owned_by: "karl-twin" }],
        });
    }
    if (req.method === "GET" && route === "/health") {
        return sendJson(res, 200, { status: "ok" });
    }
    if (route === "/v1/chat/completions" || route === "/chat/completions") {
        if (req.method !== "POST") {
            return sendError(res, 405, "use POST", "invalid_request_error");
        }
        const body = await readBody(req, res);
        if (body === undefined) return;
        let request;
        try {
            request = JSON.parse(body);
        } catch (e) {
            return sendError(res, 400, `body is not JSON: ${e.message}`, "invalid_request_error");
        }
        const problem = checkRequest(request);
        if (problem) return sendError(res, 400, problem, "invalid_request_error");
        return chat(request, res);
    }
    return sendError(res, 404, `no route ${req.method} ${url.pathname}`, "not_found");
}

function checkRequest(r) {
    if (typeof r !== "object" || r === null || Array.isArray(r)) return "body must be a JSON object";
    if (!Array.isArray(r.messages) || r.messages.length === 0) return "messages must be a non-empty array";
    for (const m of r.messages) {
        if (typeof m !== "object" || m === null) return "each message must be an object";
        if (!["system", "user", "assistant"].includes(m.role)) return `unknown role ${JSON.stringify(m.role)}`;
        if (typeof m.content !== "string") return "message content must be a string";
    }
    if (r.max_tokens !== undefined && !(Number.isInteger(r.max_tokens) && r.max_tokens > 0)) {
        return "max_tokens must be a positive integer";
    }
    if (r.temperature !== undefined && !(typeof r.temperature === "number" && r.temperature >= 0 && r.temperature <= 2)) {
        return "temperature must be a number in 0..2";
    }
    return null;
}

function chatHistory(messages) {
    return messages.map((m) => {
        if (m.role === "system") return { type: "system", text: m.content };
        if (m.role === "user") return { type: "user", text: m.content };
        return { type: "model", response: [m.content] };
    });
}

async function chat(request, res) {
    const history = chatHistory(request.messages);
    // The reply is the model's turn: the history ends with an open model message.
    history.push({ type: "model", response: [] });
    const state = wrapper.generateContextState({ chatHistory: history });
    const promptTokens = state.contextText.tokenize(model.tokenizer);
    const maxTokens = Math.min(request.max_tokens ?? 256, 2048);
    if (promptTokens.length + maxTokens > CONTEXT) {
        return sendError(
            res,
            400,
            `the request exceeds the available context size: ${promptTokens.length} prompt tokens + ${maxTokens} to generate > ${CONTEXT}`,
            "invalid_request_error",
        );
    }
    const stream = request.stream === true;
    const includeUsage = stream && request.stream_options?.include_usage === true;
    const id = `chatcmpl-${randomBytes(8).toString("hex")}`;
    const created = Math.floor(Date.now() / 1000);
    const chunk = (delta, finish) => ({
        id,
        object: "chat.completion.chunk",
        created,
        model: MODEL_NAME,
        choices: [{ index: 0, delta, finish_reason: finish }],
    });

    if (stream) {
        res.writeHead(200, {
            "content-type": "text/event-stream",
            "cache-control": "no-cache",
            connection: "keep-alive",
        });
        sse(res, chunk({ role: "assistant", content: "" }, null));
    }
    const abort = new AbortController();
    res.on("close", () => {
        if (!res.writableFinished) abort.abort();
    });

    const result = await serialized(async () => {
        const cached = Math.min(sequence.compareContextTokens(promptTokens).firstDifferentIndex, sequence.nextTokenIndex);
        const started = process.hrtime.bigint();
        const meta = await completion.generateCompletionWithMeta(promptTokens, {
            maxTokens,
            temperature: request.temperature ?? 0.7,
            seed: Number.isInteger(request.seed) ? request.seed : undefined,
            customStopTriggers: state.stopGenerationTriggers,
            signal: abort.signal,
            stopOnAbortSignal: true,
            onTextChunk: stream ? (text) => sse(res, chunk({ content: text }, null)) : undefined,
        });
        const ms = Number(process.hrtime.bigint() - started) / 1e6;
        return { meta, cached, ms };
    });
    const text = result.meta.response;
    const completionTokens = model.tokenize(text).length;
    const finish = result.meta.metadata?.stopReason === "maxTokens" ? "length" : "stop";
    const usage = {
        prompt_tokens: promptTokens.length,
        completion_tokens: completionTokens,
        total_tokens: promptTokens.length + completionTokens,
        prompt_tokens_details: { cached_tokens: result.cached },
    };
    const timings = { cache_n: result.cached, prompt_n: promptTokens.length - result.cached, total_ms: result.ms };
    if (stream) {
        sse(res, chunk({}, finish));
        if (includeUsage) {
            sse(res, { id, object: "chat.completion.chunk", created, model: MODEL_NAME, choices: [], usage });
        }
        res.write("data: [DONE]\n\n");
        res.end();
        return;
    }
    sendJson(res, 200, {
        id,
        object: "chat.completion",
        created,
        model: MODEL_NAME,
        choices: [{ index: 0, message: { role: "assistant", content: text }, finish_reason: finish }],
        usage,
        timings,
    });
}

function readBody(req, res) {
    return new Promise((resolve) => {
        const parts = [];
        let size = 0;
        req.on("data", (c) => {
            size += c.length;
            if (size > MAX_BODY) {
                sendError(res, 413, `body over ${MAX_BODY} bytes`, "invalid_request_error");
                req.destroy();
                resolve(undefined);
                return;
            }
            parts.push(c);
        });
        req.on("end", () => resolve(Buffer.concat(parts).toString("utf8")));
        req.on("error", () => resolve(undefined));
    });
}

function sse(res, value) {
    res.write(`data: ${JSON.stringify(value)}\n\n`);
}

function sendJson(res, status, value) {
    const body = JSON.stringify(value);
    res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
    res.end(body);
}

function sendError(res, status, message, type) {
    if (res.headersSent) return res.end();
    sendJson(res, status, { error: { message, type, code: status } });
}

function parseArgs(argv) {
    const out = {};
    for (let i = 0; i < argv.length; i++) {
        const a = argv[i];
        if (!a.startsWith("--")) fail(`unexpected argument ${a}`);
        const key = a.slice(2);
        if (key === "exit-on-stdin-eof") {
            out[key] = true;
        } else if (i + 1 < argv.length) {
            out[key] = argv[++i];
        } else {
            fail(`${a} needs a value`);
        }
    }
    return out;
}

function fail(message) {
    process.stderr.write(`twin server: ${message}\n`);
    process.exit(2);
}
