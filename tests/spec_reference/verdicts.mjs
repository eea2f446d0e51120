// Runs the reference validator (npm `skills-ref`) over many skill folders in one process: the
// folders come on stdin, one per line; the answer is one JSON array on stdout, the validator's
// messages for each folder in input order (an empty list is a valid folder). One process for
// every folder keeps the comparison to seconds where a `skills-ref validate` per folder would
// start Node thousands of times.
import { validate } from "skills-ref";

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const folders = Buffer.concat(chunks)
  .toString("utf8")
  .split("\n")
  .filter((line) => line.length > 0);
const verdicts = [];
for (const folder of folders) {
  verdicts.push(await validate(folder));
}
process.stdout.write(JSON.stringify(verdicts));
