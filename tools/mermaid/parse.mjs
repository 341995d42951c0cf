// Parse Mermaid diagrams with Mermaid itself: `node parse.mjs FILE...` prints [{file, ok, error}] as JSON.
// Mermaid needs a DOM to load; jsdom stands in for the browser (nothing is drawn).
import fs from "node:fs";
import { JSDOM } from "jsdom";

const dom = new JSDOM("<!doctype html><html><body></body></html>");
globalThis.window = dom.window;
globalThis.document = dom.window.document;
const { default: mermaid } = await import("mermaid");
mermaid.initialize({ startOnLoad: false });

const results = [];
for (const file of process.argv.slice(2)) {
  try {
    await mermaid.parse(fs.readFileSync(file, "utf8"));
    results.push({ file, ok: true });
  } catch (error) {
    results.push({ file, ok: false, error: String(error.message || error) });
  }
}
console.log(JSON.stringify(results));
