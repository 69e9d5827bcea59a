// Node's own timers, each printed with the performance.now() time since the
// start (ns, rounded) at which it fired, and Date.now() then (ms): a
// setTimeout, a setInterval cleared after its third call, an awaited
// promise around setTimeout, and timers/promises.
const { setTimeout: sleep } = require('timers/promises');

const start = performance.now();
const report = (what) => console.log(what, Math.round((performance.now() - start) * 1e6), Date.now());

setTimeout(() => report('timeout'), 2000);
let calls = 0;
const interval = setInterval(() => {
  calls += 1;
  if (calls === 3) {
    clearInterval(interval);
    report('interval');
  }
}, 500);
(async () => {
  await new Promise((resolve) => setTimeout(resolve, 3500));
  report('promise');
  await sleep(1000);
  report('promises-api');
})();
