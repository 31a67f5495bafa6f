// A Node ESM loader hook for running the conformance suite's CLI on node 20.
// The CLI imports fs.globSync (node >= 22), though only its tier-check command calls it. When
// node:fs lacks it, the CLI's own modules get node:fs plus a globSync that throws; on newer node
// this hook does nothing.
//   node --import ./test/peers/node20-globsync-hook.mjs .peers/npm/node_modules/@modelcontextprotocol/conformance/dist/index.js ...
import { register } from "node:module";
import fs from "node:fs";
if (!fs.globSync) {
  const shim = 'export * from "node:fs"; export { default } from "node:fs";' +
    ' export function globSync() { throw new Error("fs.globSync needs node >= 22"); }';
  const url = "data:text/javascript," + encodeURIComponent(shim);
  const hooks = "export async function resolve(spec, ctx, next) {" +
    " if ((spec === 'fs' || spec === 'node:fs') && (ctx.parentURL || '').includes('/conformance/dist/'))" +
    " return { url: " + JSON.stringify(url) + ", shortCircuit: true };" +
    " return next(spec, ctx); }";
  register("data:text/javascript," + encodeURIComponent(hooks));
}
