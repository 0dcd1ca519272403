// A naive masto loop (JavaScript): since_id = the newest status seen, every
// 0.2 s, on the public timeline. Run by `experiment judge` (see
// tests/clients/run_judged.py) as `node masto_since_id.mjs OUT_FILE ROUNDS`:
// it writes one JSON line per request, its send time in ms and the IDs served.
import { createRestAPIClient } from "masto";
import { writeFileSync, appendFileSync } from "node:fs";

const [out, rounds] = [process.argv[2], Number(process.argv[3])];
const masto = createRestAPIClient({
  url: process.env.SNOWLEAK_BASE_URL,
  accessToken: process.env.SNOWLEAK_TOKEN,
  timeout: 10_000,
});
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

writeFileSync(out, "");
let since;
for (let round = 0; round < rounds; round++) {
  const sent = Date.now();
  const page = await masto.v1.timelines.public.list({ sinceId: since, limit: 40 });
  const ids = page.map((s) => s.id);
  appendFileSync(out, JSON.stringify({ sent, ids }) + "\n");
  // Mastodon IDs are decimal strings: BigInt compares them exactly.
  for (const id of ids) if (since === undefined || BigInt(id) > BigInt(since)) since = id;
  await sleep(200);
}
