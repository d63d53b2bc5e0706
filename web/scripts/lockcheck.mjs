// lockcheck: did npm install keep the locked versions? Usage:
//   node scripts/lockcheck.mjs BEFORE AFTER
// BEFORE is the committed package-lock.json, AFTER the one npm install left.
// Every package of BEFORE must be in AFTER at the same version and
// integrity. AFTER may add optional packages (the platform builds of
// rollup and esbuild for other systems, which the registry lists on some
// days and not on others): npm records them, they change nothing that is
// installed here. Anything else is a change of the lock: exit 1, listing it.
import { readFileSync } from "node:fs";

const [before, after] = process.argv.slice(2).map((f) => JSON.parse(readFileSync(f, "utf8")).packages ?? {});
const problems = [];
for (const [path, p] of Object.entries(before)) {
  const q = after[path];
  if (!q) {
    problems.push(`${path || "(root)"}: dropped`);
  } else if (p.version !== q.version || (p.integrity && p.integrity !== q.integrity)) {
    problems.push(`${path}: ${p.version} -> ${q.version}`);
  }
}
for (const [path, q] of Object.entries(after)) {
  if (!before[path] && !q.optional) {
    problems.push(`${path}: added (${q.version}), not optional`);
  }
}
if (problems.length > 0) {
  console.error("npm changed the locked packages:\n  " + problems.join("\n  "));
  process.exit(1);
}
