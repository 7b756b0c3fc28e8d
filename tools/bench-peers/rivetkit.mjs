// RivetKit's side of benchmarks/peers.py (run from tools/bench-peers, where its node_modules are): @rivetkit/workflow-engine 2.3.19 on its in-memory driver (latency 0),
// process CPU time (process.cpuUsage) of each workload; prints one JSON line {case: seconds}.
import { runWorkflow, Loop } from "@rivetkit/workflow-engine";
import { InMemoryDriver } from "@rivetkit/workflow-engine/testing";

const N = Number(process.argv[2] ?? 1000);

function cpu() {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
}

function driver() {
  const d = new InMemoryDriver();
  d.latency = 0;
  return d;
}

async function freshSteps(n) {
  const d = driver();
  const start = cpu();
  const handle = runWorkflow(`fresh-${Math.random()}`, async (ctx) => {
    let total = 0;
    for (let i = 0; i < n; i++) total += await ctx.step(`s${i}`, async () => 1);
    return total;
  }, undefined, d);
  const result = await handle.result;
  const spent = cpu() - start;
  if (result.state !== "completed" || result.output !== n) throw new Error(JSON.stringify(result));
  return spent;
}

async function sendDrain(n) {
  const d = driver();
  const id = `drain-${Math.random()}`;
  let processed = 0;
  const workflow = async (ctx) => {
    await ctx.loop("loop", async (loop) => {
      await loop.queue.next("next", { names: ["inc"] });
      await loop.step("apply", async () => { processed += 1; return processed; });
      return processed >= n ? Loop.break(processed) : Loop.continue(undefined);
    });
    return processed;
  };
  const start = cpu();
  const handle = runWorkflow(id, workflow, undefined, d);
  for (let i = 0; i < n; i++) await handle.message("inc", { d: 1 });
  let result = await handle.result;
  while (result.state !== "completed") {
    result = await runWorkflow(id, workflow, undefined, d).result;
  }
  const spent = cpu() - start;
  if (processed < n) throw new Error(`processed ${processed}`);
  return spent;
}

const out = {};
await freshSteps(N); // warm-up
out["fresh step"] = (await freshSteps(N)) / N;
await sendDrain(N);
out["send + drain"] = (await sendDrain(N)) / N;
console.log(JSON.stringify(out));
