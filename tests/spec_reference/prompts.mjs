// Runs the reference library's `to-prompt` (npm `skills-ref`) in one process, for the catalog
// comparison in tests/library/spec_agreement.rs. The folders come on stdin, one per line.
// `node prompts.mjs each` answers one JSON array: for each folder, the block `toPrompt([folder])`
// renders, or null where it refuses the folder (no name, no description, no frontmatter...).
// `node prompts.mjs all` answers the one block `toPrompt(folders)` renders, as a JSON string.
import { toPrompt } from "skills-ref";

const mode = process.argv[2];
const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const folders = Buffer.concat(chunks)
  .toString("utf8")
  .split("\n")
  .filter((line) => line.length > 0);
if (mode === "each") {
  const blocks = [];
  for (const folder of folders) {
    try {
      blocks.push(await toPrompt([folder]));
    } catch {
      blocks.push(null);
    }
  }
  process.stdout.write(JSON.stringify(blocks));
} else if (mode === "all") {
  process.stdout.write(JSON.stringify(await toPrompt(folders)));
} else {
  throw new Error(`unknown mode ${mode}: each or all`);
}
