// speed.mjs: llama.cpp's side of tools/llamacpp/speed, through the npm package node-llama-cpp
// (its prebuilt CPU build): loads the GGUF, warms up on the first 32 prompt ids, then times a
// prefill of the prompt ids (one batch, no tokens generated) and a greedy decode of N tokens
// after them, then, in a context of STREAMS sequences, prefills a 32-id prompt in each (untimed)
// and times STREAM_TOKENS greedy tokens decoded in all of them together (node-llama-cpp puts the
// sequences' pending tokens in one batch), and prints tokens per second and the process's peak RSS
// (VmHWM) as JSON.
//
//   node speed.mjs MODEL.gguf IDS.json THREADS N STREAMS STREAM_TOKENS > out.json
//
// IDS.json is a JSON array of token ids. Run it pinned (taskset): unpinned, llama.cpp's
// two-thread decode stalls on this machine. NODE_LLAMA_CPP may name the package's dist/index.js.
import {readFileSync} from "node:fs";
import {pathToFileURL} from "node:url";

const [modelPath, idsPath, threadsArg, nArg, streamsArg, streamTokensArg] = process.argv.slice(2);
if (!modelPath || !idsPath || !threadsArg || !nArg || !streamsArg || !streamTokensArg) {
    console.error("usage: node speed.mjs MODEL.gguf IDS.json THREADS N STREAMS STREAM_TOKENS");
    process.exit(2);
}
const threads = Number(threadsArg), n = Number(nArg), streams = Number(streamsArg), streamTokens = Number(streamTokensArg);
// A stream's prompt and session, as tools/llamacpp/speed's streamPrompt, streamStride and streamSlots.
const streamPrompt = 32, streamStride = 16, streamSlots = 128;
const where = process.env.NODE_LLAMA_CPP ?? "node-llama-cpp";
const {getLlama} = await import(where.startsWith("/") ? pathToFileURL(where).href : where);

const ids = JSON.parse(readFileSync(idsPath, "utf8"));
const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
const model = await llama.loadModel({modelPath, gpuLayers: 0});
const context = await model.createContext({contextSize: 1024, threads, batchSize: 512, sequences: 1});
const sequence = context.getSequence();

// decode generates n tokens greedily after what the sequence holds, starting from token.
async function decode(sequence, token, n) {
    let made = 0;
    for await (const _ of sequence.evaluate([token], {temperature: 0, yieldEogToken: true})) {
        if (++made >= n) {
            break;
        }
    }
}

await sequence.evaluateWithoutGeneratingNewTokens(ids.slice(0, 32));
await decode(sequence, ids[32], 4);
await sequence.clearHistory();

// cpuSeconds is the process's CPU time, user and system (getrusage), as tfd's side reads it.
function cpuSeconds() {
    const {user, system} = process.cpuUsage();
    return (user + system) / 1e6;
}

let start = process.hrtime.bigint(), cpu0 = cpuSeconds();
await sequence.evaluateWithoutGeneratingNewTokens(ids);
const prefill = Number(process.hrtime.bigint() - start) / 1e9, cpu1 = cpuSeconds();
start = process.hrtime.bigint();
await decode(sequence, ids[0], n);
const decodeSeconds = Number(process.hrtime.bigint() - start) / 1e9, cpu2 = cpuSeconds();
const currentThreads = context.currentThreads;
await context.dispose();

// The streams: a context of as many cells as the single sequence's, shared by them.
const shared = await model.createContext({contextSize: streamSlots, threads, batchSize: 512, sequences: streams});
const seqs = Array.from({length: streams}, () => shared.getSequence());
const prompts = seqs.map((_, s) => ids.slice(s * streamStride, s * streamStride + streamPrompt));
await Promise.all(seqs.map((q, s) => q.evaluateWithoutGeneratingNewTokens(prompts[s])));
start = process.hrtime.bigint();
const cpu3 = cpuSeconds();
await Promise.all(seqs.map((q, s) => decode(q, ids[s * streamStride + streamPrompt], streamTokens)));
const aggregateSeconds = Number(process.hrtime.bigint() - start) / 1e9, cpu4 = cpuSeconds();

const hwm = /VmHWM:\s+(\d+) kB/.exec(readFileSync("/proc/self/status", "utf8"));
console.log(JSON.stringify({
    threads: currentThreads, prompt: ids.length, tokens: n,
    prompt_tps: ids.length / prefill, decode_tps: n / decodeSeconds,
    streams, stream_tokens: streamTokens, aggregate_tps: streams * streamTokens / aggregateSeconds,
    peak_rss_kib: Number(hwm[1]),
    prompt_cpu_s: cpu1 - cpu0, decode_cpu_s: cpu2 - cpu1, aggregate_cpu_s: cpu4 - cpu3,
}));
await shared.dispose();
await model.dispose();
await llama.dispose();
