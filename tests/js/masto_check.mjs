// Reads the simulator's Mastodon API with masto (pinned in package.json), a
// JavaScript client library none of us wrote: a since_id poll, paging back
// with its paginator (Link rel="next", max_id), and walking up again with the
// paginator turned around (rel="prev", min_id).
//
//     experiment serve --profile mastodon --set rate_per_s=20 --set delete_probability=0 &
//     npm ci --prefix tests/js && node tests/js/masto_check.mjs http://127.0.0.1:8080
//
// The same walks as tests/checklib.py; exits 1 on the first divergence.
import { createRestAPIClient } from "masto";

const base = process.argv[2] ?? "http://127.0.0.1:8080";
const masto = createRestAPIClient({ url: base, timeout: 10_000 });

function check(condition, message) {
  if (!condition) {
    console.log(`FAIL: ${message}`);
    process.exit(1);
  }
  console.log(`ok: ${message}`);
}

// Mastodon IDs are decimal strings: BigInt compares them exactly.
const ids = (page) => page.map((s) => BigInt(s.id));
const descending = (xs) => xs.every((x, i) => i === 0 || xs[i - 1] > x);
const ascending = (xs) => xs.every((x, i) => i === 0 || xs[i - 1] < x);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const timeline = (params) => masto.v1.timelines.public.list(params);

let first = [];
for (let i = 0; i < 120 && first.length < 30; i++) {
  first = ids(await timeline({ limit: 40 }));
  if (first.length < 30) await sleep(500);
}
check(first.length >= 30, `the simulator posted (${first.length} statuses)`);
check(descending(first), "the public timeline is newest first");

// A since_id poll: every status above the cursor, never one twice.
let cursor = first[0];
const seen = new Set();
for (let round = 1; round <= 8; round++) {
  await sleep(500);
  const got = ids(await timeline({ limit: 40, sinceId: String(cursor) }));
  check(got.every((id) => id > cursor) && descending(got), `poll ${round}: ${got.length} statuses above since_id, newest first`);
  check(got.every((id) => !seen.has(id)), `poll ${round}: nothing seen twice`);
  got.forEach((id) => seen.add(id));
  if (got.length) cursor = got[0];
}
check(seen.size > 0, `polling with since_id saw new statuses (${seen.size})`);

// Down with the paginator (rel="next")...
const down = [];
let pages = 0;
for await (const page of timeline({ limit: 10, maxId: String(cursor) })) {
  down.push(...ids(page));
  if (++pages === 3) break;
}
check(pages === 3 && descending(down) && down[0] < cursor, `the paginator paged back ${down.length} statuses over 3 pages`);

// ... and up again with it turned around (rel="prev", min_id).
const bottom = down[down.length - 1];
const up = [];
pages = 0;
for await (const page of timeline({ limit: 10, minId: String(bottom) }).setDirection("prev")) {
  const got = ids(page);
  check(descending(got) && got.every((id) => id > bottom), `prev page ${pages + 1} is newest first, above min_id`);
  check(up.length === 0 || got.every((id) => id > up[up.length - 1]), `prev page ${pages + 1} is above the last one`);
  up.push(...got.reverse());
  if (++pages === 3) break;
}
check(ascending(up), "walking up with rel=prev never goes back down");
const upSet = new Set(up);
const missing = down.slice(0, -1).filter((id) => !upSet.has(id));
check(missing.length === 0, `walking up found every status paged down (${missing.length} missing)`);
console.log(`all checks passed (${seen.size} polled, ${down.length} paged back, ${up.length} walked up)`);
