// greedy.mjs: greedy completions by llama.cpp (through the npm package node-llama-cpp, its
// prebuilt CPU build) of raw prompts, no chat template, one thread, printed as JSON for
// tools/llamacpp (the Go side) to compare with tfd on the same GGUF file.
//
//   node greedy.mjs MODEL.gguf PROMPTS.json [N [KV [FA]]] > out.json
//
// PROMPTS.json is a JSON array of strings. Each prompt is tokenized by llama.cpp (special tokens
// parsed, no BOS added, as tfd encodes) and continued N tokens greedily, through end-of-generation
// tokens. For every step the output keeps the chosen token and its logit margin over the runner-up
// (ln p1 - ln p2 of the softmax over the whole vocabulary, which is the logit difference).
// KV is the type of llama.cpp's KV cache: F16 (its default) or F32 (tfd's). FA is flash attention:
// auto (the default, which turns it on for the CPU; its CPU kernel rounds queries, keys and
// values to F16), on or off.
// NODE_LLAMA_CPP may name the package's dist/index.js when it is installed outside this folder.
import {readFileSync} from "node:fs";
import {pathToFileURL} from "node:url";

const [modelPath, promptsPath, nArg, kvArg, faArg] = process.argv.slice(2);
if (!modelPath || !promptsPath) {
    console.error("usage: node greedy.mjs MODEL.gguf PROMPTS.json [N [KV [FA]]]");
    process.exit(2);
}
const n = Number(nArg ?? 32);
const kv = kvArg ?? "F16";
// ggml's type numbers: the addon reads the cache types only as numbers.
const kvType = {F32: 0, F16: 1}[kv];
const fa = faArg ?? "auto";
const flashAttention = {auto: "auto", on: true, off: false}[fa];
if (kvType === undefined || flashAttention === undefined) {
    console.error(`KV type ${kv}, flash attention ${fa}: want F16 or F32, and auto, on or off`);
    process.exit(2);
}
const where = process.env.NODE_LLAMA_CPP ?? "node-llama-cpp";
const {getLlama} = await import(where.startsWith("/") ? pathToFileURL(where).href : where);

const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
const model = await llama.loadModel({modelPath, gpuLayers: 0});
const prompts = JSON.parse(readFileSync(promptsPath, "utf8"));
const context = await model.createContext({
    contextSize: 1024, threads: 1, batchSize: 512, sequences: 1,
    experimentalKvCacheKeyType: kvType, experimentalKvCacheValueType: kvType, flashAttention,
});
const sequence = context.getSequence();

const results = [];
for (const text of prompts) {
    await sequence.clearHistory();
    const promptIds = model.tokenize(text, true);
    const tokens = [], margins = [], runnersUp = [];
    const steps = sequence.evaluateWithMetadata(promptIds, {probabilities: true}, {temperature: 0, yieldEogToken: true});
    for await (const step of steps) {
        // The two most probable tokens; on a tie greedy may have chosen the second listed.
        const [[first, p1], [second, p2]] = [...step.probabilities.entries()].slice(0, 2);
        tokens.push(step.token);
        runnersUp.push(step.token === first ? second : first);
        margins.push(Math.log(p1) - Math.log(p2));
        if (tokens.length >= n) {
            break;
        }
    }
    results.push({text, prompt_ids: [...promptIds], tokens, runners_up: runnersUp, margins});
}
console.log(JSON.stringify({model: modelPath, threads: context.currentThreads, kv, flash_attention: fa, results}));
await context.dispose();
await model.dispose();
await llama.dispose();
