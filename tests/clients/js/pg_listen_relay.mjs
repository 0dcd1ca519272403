// An outbox relay on pg-listen 1.7.0 (npm), written as its README shows ("Usage"):
//
//     node pg_listen_relay.mjs STATEDIR NAME
//
// A trigger on `outbox` NOTIFYs each inserted key on the channel `outbox`
// (log_library_app.py); the relay LISTENs there and appends each notified key
// to STATEDIR/NAME.csv. A notification goes to the sessions listening when
// its transaction commits (PostgreSQL manual, NOTIFY), and pg-listen keeps
// nothing of what was notified while no relay listened: a relay that is down
// misses those keys for good. That is the point of judging it.
//
// Connection from the judge's environment (DATABASE_URL, PGHOST, ...). Makes
// STATEDIR/ready once it listens; exits 3 s after STATEDIR/writers-done appears.

import fs from 'node:fs';
import path from 'node:path';
import createSubscriber from 'pg-listen';

const [statedir, name] = process.argv.slice(2);
const CATCH_UP_MS = 3000;
const out = fs.openSync(path.join(statedir, `${name}.csv`), 'a');

// Accepts the same connection config object that the "pg" package would take.
const subscriber = createSubscriber({ connectionString: process.env.DATABASE_URL });

subscriber.notifications.on('outbox', (payload) => {
  // The payload is parsed as JSON by default: the key's text is a number.
  fs.writeSync(out, `${payload}\n`);
});

subscriber.events.on('error', (error) => {
  console.error('Fatal database connection error:', error);
  process.exit(1);
});

process.on('exit', () => {
  subscriber.close();
});

await subscriber.connect();
await subscriber.listenTo('outbox');
fs.writeFileSync(path.join(statedir, 'ready'), '');

const watch = setInterval(() => {
  if (fs.existsSync(path.join(statedir, 'writers-done'))) {
    clearInterval(watch);
    setTimeout(() => process.exit(0), CATCH_UP_MS);
  }
}, 100);
