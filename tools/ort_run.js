// Runs an ONNX model with ONNX Runtime (npm's onnxruntime-node, installed by ./setup.sh under
// data/npm) on the tensors of a safetensors file, and writes its outputs to another: the reference
// moongrad's ONNX import is checked against (tests/lua/test_ocr.lua, scripts/08_onnx.lua) and the
// peer in bench/onnx_ocr.lua.
//   node tools/ort_run.js MODEL.onnx IN.safetensors OUT.safetensors [--threads N] [--bench RUNS]
// Each tensor of IN feeds the model input of the same name. With --bench, prints the median time
// of RUNS runs in ms ("ort_ms 12.3") after one warm-up run.
"use strict";
const fs = require("fs");
const path = require("path");
const ort = require(path.join(__dirname, "..", "data", "npm", "node_modules", "onnxruntime-node"));

// safetensors dtype <-> ONNX Runtime tensor type and typed array
const DTYPES = {
  F32: ["float32", Float32Array], F64: ["float64", Float64Array], I64: ["int64", BigInt64Array],
  I32: ["int32", Int32Array], U8: ["uint8", Uint8Array], I8: ["int8", Int8Array], BOOL: ["bool", Uint8Array],
};

function readSafetensors(file) {
  const buf = fs.readFileSync(file);
  const n = Number(buf.readBigUInt64LE(0));
  const header = JSON.parse(buf.subarray(8, 8 + n).toString("utf8"));
  const out = {};
  for (const [name, info] of Object.entries(header)) {
    if (name === "__metadata__") continue;
    const [type, Arr] = DTYPES[info.dtype] || [];
    if (!type) throw new Error(`${file}: ${name} has dtype ${info.dtype}, not supported here`);
    const [b, e] = info.data_offsets;
    const bytes = buf.subarray(8 + n + b, 8 + n + e);
    const copy = new Uint8Array(bytes); // aligned for the typed array
    out[name] = new ort.Tensor(type, new Arr(copy.buffer), info.shape);
  }
  return out;
}

function writeSafetensors(file, tensors) {
  const header = {};
  const parts = [];
  let offset = 0;
  for (const [name, t] of Object.entries(tensors)) {
    const code = Object.keys(DTYPES).find((k) => DTYPES[k][0] === t.type);
    if (!code) throw new Error(`output ${name} has type ${t.type}, not supported here`);
    const bytes = Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength);
    header[name] = { dtype: code, shape: t.dims, data_offsets: [offset, offset + bytes.length] };
    parts.push(bytes);
    offset += bytes.length;
  }
  let json = JSON.stringify(header);
  json += " ".repeat((8 - (json.length % 8)) % 8);
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(Buffer.byteLength(json)));
  const tmp = file + ".tmp"; // written whole, then renamed: never a half-written reference
  fs.writeFileSync(tmp, Buffer.concat([len, Buffer.from(json), ...parts]));
  fs.renameSync(tmp, file);
}

async function main() {
  const argv = process.argv.slice(2);
  const opt = (name, dflt) => {
    const i = argv.indexOf(name);
    if (i < 0) return dflt;
    const v = Number(argv[i + 1]);
    argv.splice(i, 2);
    return v;
  };
  const threads = opt("--threads", 1);
  const runs = opt("--bench", 0);
  if (argv.length !== 3) {
    console.error("usage: node tools/ort_run.js MODEL.onnx IN.safetensors OUT.safetensors [--threads N] [--bench RUNS]");
    process.exit(2);
  }
  const [model, input, output] = argv;
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: threads, interOpNumThreads: 1, executionProviders: ["cpu"],
  });
  const feeds = readSafetensors(input);
  let outs = await session.run(feeds);
  if (runs > 0) {
    const times = [];
    for (let i = 0; i < runs; i++) {
      const t0 = process.hrtime.bigint();
      outs = await session.run(feeds);
      times.push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
    times.sort((a, b) => a - b);
    console.log(`ort_ms ${times[Math.floor(times.length / 2)].toFixed(3)}`);
  }
  writeSafetensors(output, outs);
}

main().catch((e) => {
  console.error(`ort_run: ${e.message}`);
  process.exit(1);
});
