#!/usr/bin/env node
// Runs a TF.js graph model from disk with plain @tensorflow/tfjs.
//
// @tensorflow/tfjs-node would be faster but its install downloads a native
// binary, which offline machines cannot do; so the model is loaded through an
// IO handler that reads model.json and the weight shards with fs. The
// WebAssembly backend (its .wasm files ship inside the npm package) is ~7x
// faster than the pure JS "cpu" backend on a small convnet. The caller retries
// with backend "cpu" in a fresh process where wasm fails (e.g. Keras RNN
// graphs with TensorList ops); a failed backend leaves the engine unusable.
//
// Usage: node run_tfjs.js REQUEST.json
// REQUEST: {model_dir, inputs: {name: {path, dtype, shape}}, batch_size, latency_runs, warmup_runs, out_dir,
//           backend, latency_batch (default 1), latency_budget_ms (optional), latency_min_runs (default 3)}
// Each input is named as in the model's signature (model.json) and fed by that name; dtype is float32
// or int32 (raw little-endian .bin) or string (a JSON array of the flattened strings).
// The timed calls run the first `latency_batch` rows of the input as one batch: `latency_runs`
// calls, or fewer once `latency_budget_ms` of timed calls have passed (at least `latency_min_runs`).
// Writes one float32 (little endian) .bin per output and <out_dir>/result.json:
// {outputs: {name: {shape, file}}, latency_ms: [...], backend, tfjs_version}.
"use strict";

const fs = require("fs");
const path = require("path");
const tf = require("@tensorflow/tfjs");
require("@tensorflow/tfjs-backend-wasm");

function fileHandler(modelDir) {
  const modelJson = JSON.parse(fs.readFileSync(path.join(modelDir, "model.json"), "utf8"));
  return {
    load: () =>
      tf.io.getModelArtifactsForJSON(modelJson, async (manifest) => {
        const specs = [];
        const buffers = [];
        for (const group of manifest) {
          for (const p of group.paths) {
            const b = fs.readFileSync(path.join(modelDir, p));
            buffers.push(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength));
          }
          specs.push(...group.weights);
        }
        return [specs, tf.io.concatenateArrayBuffers(buffers)];
      }),
  };
}

function readInput(spec) {
  if (spec.dtype === "string") {
    return { data: JSON.parse(fs.readFileSync(spec.path, "utf8")), shape: spec.shape, dtype: "string" };
  }
  const b = fs.readFileSync(spec.path);
  const ab = b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength);
  const data = spec.dtype === "int32" ? new Int32Array(ab) : new Float32Array(ab);
  return { data, shape: spec.shape, dtype: spec.dtype === "int32" ? "int32" : "float32" };
}

// Rows [start, stop) of every input, as tensors keyed by input name.
function slice(inputs, start, stop) {
  const out = {};
  for (const [name, input] of Object.entries(inputs)) {
    const per = input.shape.slice(1).reduce((a, b) => a * b, 1);
    const rows = input.data.slice(start * per, stop * per);
    out[name] = tf.tensor(rows, [stop - start, ...input.shape.slice(1)], input.dtype);
  }
  return out;
}

function disposeAll(tensors) {
  for (const t of Object.values(tensors)) t.dispose();
}

// Outputs as {name: tensor}: predictAsync returns a map keyed by the structured
// output names ("predictions") when the converter recorded them; otherwise a
// tensor or array, named after model.outputs.
function namedOutputs(model, result) {
  if (result instanceof tf.Tensor) return { [model.outputs[0].name]: result };
  if (Array.isArray(result)) return Object.fromEntries(result.map((t, i) => [model.outputs[i].name, t]));
  return result;
}

// Sync predict where it works; graphs with control flow (RNN while loops) need predictAsync.
let needsAsync = false;
async function infer(model, x) {
  if (!needsAsync) {
    try {
      return model.predict(x);
    } catch (e) {
      if (!/executeAsync|dynamic|control flow/i.test(e.message)) throw e;
      needsAsync = true;
    }
  }
  return model.predictAsync(x);
}

async function main() {
  const req = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
  await run(req, req.backend || "wasm");
}

async function run(req, backend) {
  if (!(await tf.setBackend(backend))) throw new Error(`backend ${backend} is unavailable`);
  await tf.ready();
  const model = await tf.loadGraphModel(fileHandler(req.model_dir));
  const inputs = Object.fromEntries(Object.entries(req.inputs).map(([name, spec]) => [name, readInput(spec)]));
  const n = Object.values(inputs)[0].shape[0];
  const bs = req.batch_size || 256;
  const chunks = {};
  const shapes = {};
  for (let start = 0; start < n; start += bs) {
    const stop = Math.min(n, start + bs);
    const x = slice(inputs, start, stop);
    const out = namedOutputs(model, await infer(model, x));
    for (const [name, t] of Object.entries(out)) {
      (chunks[name] = chunks[name] || []).push(await t.data());
      shapes[name] = [n, ...t.shape.slice(1)];
      t.dispose();
    }
    disposeAll(x);
  }
  fs.mkdirSync(req.out_dir, { recursive: true });
  for (const [name, parts] of Object.entries(chunks)) {
    const total = parts.reduce((a, p) => a + p.length, 0);
    const flat = new Float32Array(total);
    let off = 0;
    for (const p of parts) {
      flat.set(p, off);
      off += p.length;
    }
    const file = `${Object.keys(shapes).indexOf(name)}.bin`;
    fs.writeFileSync(path.join(req.out_dir, file), Buffer.from(flat.buffer));
    shapes[name] = { shape: shapes[name], file };
  }
  // Latency of `latency_batch` rows per call (batch 1 by default); the caller takes the median.
  const latency = [];
  const rows = Math.min(n, req.latency_batch || 1);
  const budget = req.latency_budget_ms || Infinity;
  const warmup = req.warmup_runs === undefined ? 5 : req.warmup_runs;
  const xb = slice(inputs, 0, rows);
  let spent = 0;
  for (let i = 0; i < warmup + (req.latency_runs || 0); i++) {
    if (i >= warmup + (req.latency_min_runs || 3) && spent >= budget) break;
    const t0 = process.hrtime.bigint();
    const out = namedOutputs(model, await infer(model, xb));
    for (const t of Object.values(out)) {
      await t.data();
      t.dispose();
    }
    const ms = Number(process.hrtime.bigint() - t0) / 1e6;
    if (i >= warmup) {
      latency.push(ms);
      spent += ms;
    }
  }
  disposeAll(xb);
  const result = { outputs: shapes, latency_ms: latency, backend: tf.getBackend(), tfjs_version: tf.version.tfjs };
  fs.writeFileSync(path.join(req.out_dir, "result.json"), JSON.stringify(result));
}

main().catch((e) => {
  console.error(e && e.stack ? e.stack : String(e));
  console.error(`error: ${e && e.message ? e.message : String(e)}`); // the last line: quoted by the caller
  process.exit(1);
});
