// The loss pg-logical-replication 2.5.0's acknowledge() can cause, made to
// happen at once, for `experiment judge --log postgres` (docs/relays.md):
//
//     experiment judge --log postgres --table adjacent --promise relay=at-least-once \
//         --delivered relay=DIR/relay.csv -- node tests/clients/js/pg_logical_adjacent_commits.mjs DIR
//
// Two transactions insert keys 1 and 2 and commit one right after the other,
// so that the second's commit record begins where the first's ends. A relay
// as pg_logical_relay.mjs (manual acknowledgement after each write) delivers
// key 1, acknowledges the first transaction's Commit message, and stops
// there (as a relay killed at that moment). acknowledge(lsn) reports lsn + 1
// as written, flushed and applied; a Commit message's XLogData carries the
// end of the commit record (PostgreSQL's logical.c, commit_cb_wrapper:
// write_location = txn->end_lsn), so the slot's confirmed_flush_lsn is one
// byte past the start of the second commit record. A relay started again on
// the slot (from its confirmed position) never receives key 2: decoding
// skips a transaction whose commit record begins before the position it
// starts at (decode.c, DecodeCommit; snapbuild.c, SnapBuildXactNeedsSkip).
// Then key 3 commits and the second relay delivers it: key 2, below it, is
// lost. Prints the slot's position and the commit records' LSNs.
//
// With --ack-commit-lsn as a second argument, the relay acknowledges a
// Commit message's `commitLsn` (where the commit record begins) instead of
// the message's LSN: the slot's position is then inside the first commit
// record, before the second, and the second life delivers key 2.

import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { LogicalReplicationService, PgoutputPlugin } from 'pg-logical-replication';

const [dir, option] = process.argv.slice(2);
const ackCommitLsn = option === '--ack-commit-lsn';
const clientConfig = { connectionString: process.env.DATABASE_URL };
fs.mkdirSync(dir, { recursive: true });
const out = fs.openSync(path.join(dir, 'relay.csv'), 'a');

async function client() {
  const c = new pg.Client(clientConfig);
  await c.connect();
  return c;
}

const admin = await client();
await admin.query('CREATE TABLE adjacent (id int PRIMARY KEY)');
await admin.query('CREATE PUBLICATION adjacent_pub FOR TABLE adjacent');
await admin.query("SELECT pg_create_logical_replication_slot('adjacent_slot', 'pgoutput')");
const a = await client();
const b = await client();
await a.query('BEGIN');
await a.query('INSERT INTO adjacent VALUES (1)');
await b.query('BEGIN');
await b.query('INSERT INTO adjacent VALUES (2)');
await a.query('COMMIT');
await b.query('COMMIT');
const { rows: [{ lsn: walEnd }] } = await admin.query('SELECT pg_current_wal_lsn()::text AS lsn');

// One life of the relay: deliver and acknowledge each message after writing
// its key; with `stopAfterFirstCommit`, end right after the first Commit's
// acknowledgement; else end once `until` keys are delivered.
function relay(stopAfterFirstCommit, until) {
  return new Promise((resolve) => {
    const service = new LogicalReplicationService(clientConfig, {
      acknowledge: { auto: false, timeoutSeconds: 0 },
      flowControl: { enabled: true },
    });
    const seen = [];
    service.on('data', async (lsn, log) => {
      if (log.tag === 'insert') {
        fs.writeSync(out, `${log.new.id}\n`);
        seen.push(log.new.id);
      }
      if (log.tag === 'commit') console.log(`commit ${log.commitLsn} to ${log.commitEndLsn}, XLogData at ${lsn}`);
      await service.acknowledge(ackCommitLsn && log.tag === 'commit' ? log.commitLsn : lsn);
      if ((stopAfterFirstCommit && log.tag === 'commit') || (!stopAfterFirstCommit && seen.includes(until))) {
        await service.destroy();
        resolve(seen);
      }
    });
    service.subscribe(new PgoutputPlugin({ protoVersion: 1, publicationNames: ['adjacent_pub'] }), 'adjacent_slot')
      .catch(() => {});
  });
}

console.log('first life delivered', await relay(true));
const slot = async () =>
  (await admin.query("SELECT confirmed_flush_lsn::text AS c FROM pg_replication_slots WHERE slot_name = 'adjacent_slot'")).rows[0].c;
console.log(`slot confirmed_flush_lsn ${await slot()}; the WAL ended at ${walEnd} after the two commits`);
await admin.query('INSERT INTO adjacent VALUES (3)');
console.log('second life delivered', await relay(false, 3));
await a.end();
await b.end();
await admin.end();
