// Bundles the extension (Node, CommonJS), the panel script (browser) and, with --tests, the
// unit and end-to-end tests, which run as plain Node scripts.
import { build } from "esbuild";
import { readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const production = process.argv.includes("--production");
const withTests = process.argv.includes("--tests");
const common = { absWorkingDir: root, bundle: true, logLevel: "warning", sourcemap: production ? false : "linked" };

const jobs = [
  build({
    ...common,
    entryPoints: ["src/extension.ts"],
    outfile: "dist/extension.js",
    platform: "node",
    format: "cjs",
    target: "node20",
    external: ["vscode"],
    minify: production,
  }),
  build({
    ...common,
    entryPoints: ["src/webview/main.ts"],
    outfile: "dist/webview.js",
    platform: "browser",
    format: "iife",
    target: "es2022",
    minify: production,
  }),
];

if (withTests) {
  const entries = (dir, suffix) =>
    readdirSync(join(root, dir)).filter((name) => name.endsWith(suffix)).map((name) => join(dir, name));
  jobs.push(
    build({
      ...common,
      entryPoints: [...entries("test", ".test.ts"), ...entries("e2e", ".e2e.ts")],
      outdir: "out",
      outbase: ".",
      platform: "node",
      format: "cjs",
      target: "node20",
      packages: "external",
      sourcemap: "inline",
    }),
  );
}

await Promise.all(jobs);
