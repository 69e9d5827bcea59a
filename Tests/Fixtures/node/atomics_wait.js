// Atomics.wait(buffer, 0, 0, 4000) in a worker, measured there with process.hrtime.bigint() (issue 30).
const { Worker, isMainThread, parentPort } = require("worker_threads");
if (isMainThread) {
  const worker = new Worker(__filename);
  worker.on("message", (ns) => console.log(ns));
} else {
  const buffer = new Int32Array(new SharedArrayBuffer(4));
  const start = process.hrtime.bigint();
  const result = Atomics.wait(buffer, 0, 0, 4000);
  parentPort.postMessage(`${result} ${process.hrtime.bigint() - start}`);
}
