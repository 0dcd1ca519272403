//! The note creators: several Misskey processes' worth of concurrent
//! `create()` calls, each process with its own aidx node ID, over a seeded
//! follow graph; local notes at a rate, remote notes arriving after a
//! federation delay and IDed at their `published` time (misskey-dev/misskey
//! `ApNoteService.createNote`: `createdAt: note.published`).
//!
//! Each note: ID from `createdAt` at the start, INSERT (awaited), then
//! `pushToTl` spawned and not awaited, as `postNoteCreated` does. What each
//! step did is sent to the truth channel.

use super::aidx::Aidx;
use super::federation::{Arrival, Delay, DelayDist};
use super::push::{self, Caps, Note, Report};
use super::store;
use super::timeline::{PushGate, RedisSource};
use crate::workload::{Arrivals, WriterPace};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Exp};
use std::sync::Arc;
use tokio::sync::{mpsc, watch};

/// The load, resolved from the command line.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Load {
    /// Concurrent creators, each a Misskey process with its own node ID.
    pub creators: u32,
    /// Local users (user 0 is the pollers' account).
    pub local_users: u32,
    /// Remote users whose notes arrive by federation.
    pub remote_users: u32,
    /// How many users each local user follows (seeded, uniform).
    pub follows_per_user: u32,
    /// Local notes per second, all creators together.
    pub local_rate_per_s: f64,
    /// Remote notes per second, all creators together.
    pub remote_rate_per_s: f64,
    /// Mean federation delay, from `published` to arrival (`--federation-delay`).
    pub federation_delay_ms: u64,
    /// Its shape (`--federation-delay-dist`).
    pub federation_delay_dist: DelayDist,
    /// Share of remote notes that arrive late (`--late-share`): from
    /// [`super::federation::late_floor_ms`] (181 s, past Misskey's 3 minutes,
    /// so the LINDEX path) up to `late_max_ms`.
    pub late_share: f64,
    /// The late notes' ceiling (`--late-max`, default 540 s).
    pub late_max_ms: u64,
    /// Which notes their authors delete, and when (`--delete-share`).
    pub deletes: Deletes,
    pub caps: Caps,
    /// How each creator spaces its notes (`--arrivals`); stored at the top
    /// of `runs.config`, not here.
    #[serde(skip)]
    pub arrivals: Arrivals,
    /// The run's seed: the notes' timing, authors and delays.
    pub seed: u64,
    /// The follow graph's seed (`--graph-seed`; the run's seed unless
    /// given), so that a graph can be held fixed while `seed` varies.
    pub graph_seed: u64,
}

/// `--delete-share` and `--delete-after`: the share of notes their authors
/// delete, each after an exponential time from its commit. Misskey's
/// `NoteDeleteService.delete` deletes the row and leaves the Redis lists as
/// they are (docs/misskey-ftt.md); none is deleted by default.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct Deletes {
    /// Share of notes deleted, 0 to 1.
    pub share: f64,
    /// Mean time from the commit to the `DELETE`.
    pub after_ms: u64,
}

impl Load {
    /// The users are numbered 0.. (local first, then remote).
    pub fn is_local(&self, user: i32) -> bool {
        (user as u32) < self.local_users
    }

    /// How remote notes arrive after their `published` time.
    pub fn arrival(&self) -> Arrival {
        Arrival {
            delay: Delay::new(self.federation_delay_dist, self.federation_delay_ms),
            late_share: self.late_share,
            late_max_ms: self.late_max_ms,
        }
    }

    /// Of the users local user 0 (the pollers' account) follows, the share
    /// that is remote: with the note rates, what decides how many of its
    /// home timeline's notes arrive by federation.
    pub fn remote_share_followed(&self) -> f64 {
        let followed: Vec<i32> = self
            .follows()
            .into_iter()
            .filter(|&(_, follower)| follower == 0)
            .map(|(followee, _)| followee)
            .collect();
        let remote = followed.iter().filter(|&&u| !self.is_local(u)).count();
        remote as f64 / followed.len().max(1) as f64
    }

    /// The seeded follow graph (from `graph_seed`), `(followee, follower)`: each local user follows
    /// `follows_per_user` distinct others; user 0 follows at least one local
    /// and one remote user when there are any, so its home timeline fills.
    pub fn follows(&self) -> Vec<(i32, i32)> {
        let mut rng = ChaCha8Rng::seed_from_u64(self.graph_seed ^ 0xf011_0a5e);
        let users = (self.local_users + self.remote_users) as i32;
        let mut out = Vec::new();
        for follower in 0..self.local_users as i32 {
            let mut chosen = std::collections::BTreeSet::new();
            let want = (self.follows_per_user as i32).min(users - 1).max(0);
            while (chosen.len() as i32) < want {
                let f = rng.random_range(0..users);
                if f != follower {
                    chosen.insert(f);
                }
            }
            if follower == 0 {
                if self.local_users > 1 {
                    chosen.insert(1);
                }
                if self.remote_users > 0 {
                    chosen.insert(self.local_users as i32);
                }
            }
            out.extend(chosen.into_iter().map(|f| (f, follower)));
        }
        out
    }
}

/// One note's life, for the truth.
#[derive(Clone, Debug)]
pub struct Created {
    pub note: Note,
    /// The ID's time (`createdAt`).
    pub id_ms: i64,
    /// When `create()` started (a remote note's arrival).
    pub started_ms: i64,
    /// When the INSERT returned.
    pub committed_ms: i64,
}

impl Created {
    /// The truth's `origin`: `local`, `remote`, or `remote-late` for a
    /// remote note that arrived over 3 minutes after its ID's time (the
    /// `LINDEX` path of `push`).
    pub fn origin(&self) -> &'static str {
        if self.note.is_local {
            "local"
        } else if self.started_ms - self.id_ms > push::RECENT_MS {
            "remote-late"
        } else {
            "remote"
        }
    }
}

/// What the creators send to the truth.
#[derive(Debug)]
pub enum Event {
    Created(Created),
    Pushed {
        id: String,
        report: Report,
    },
    /// The note's `DELETE`, sent and returned: its `ftt_deletes` row.
    Deleted(rundb::FttDeleteRow),
    Failed(String),
}

/// One creator: a Misskey process's worth of `create()` calls.
pub struct Creator<R, G> {
    /// Its place among the creators: seeds its draws and its node ID.
    pub index: u32,
    pub load: Arc<Load>,
    pub pg: Arc<tokio_postgres::Client>,
    /// Gives the connection each push is sent on.
    pub redis: R,
    /// Where what each step did goes (the truth).
    pub events: mpsc::Sender<Event>,
    pub stop: watch::Receiver<bool>,
    /// Whether a note committed at a given ms is pushed (FTT on then).
    pub ftt_enabled: G,
    /// Reads the clock.
    pub now: fn() -> i64,
}

/// Runs one creator until its `stop` turns true.
pub async fn run_creator(creator: Creator<impl RedisSource, impl PushGate>) {
    let Creator {
        index,
        load,
        pg,
        redis,
        events,
        mut stop,
        ftt_enabled,
        now,
    } = creator;
    let mut draws = Draws::new(index, &load, now);
    loop {
        let wait = draws.wait_ms(now);
        tokio::select! {
            _ = tokio::time::sleep(std::time::Duration::from_millis(wait)) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        let (note, id_ms, started_ms) = draws.note(&load, now);
        if let Err(e) =
            store::insert_note(&pg, &note.id, note.user_id, note.is_local, note.has_files).await
        {
            let _ = events.send(Event::Failed(e)).await;
            continue;
        }
        let committed_ms = now();
        let _ = events
            .send(Event::Created(Created {
                note: note.clone(),
                id_ms,
                started_ms,
                committed_ms,
            }))
            .await;
        if let Some(due_ms) = draws.deletion_due(&load, committed_ms) {
            tokio::spawn(delete_at(
                due_ms,
                note.id.clone(),
                pg.clone(),
                events.clone(),
                stop.clone(),
                now,
            ));
        }
        // `pushToTl` is not awaited: the next note may start before it ends.
        // Its first line returns when `enableFanoutTimeline` is off; the
        // switch is read as of the commit (`--ftt-off`).
        if !ftt_enabled.pushes_at(committed_ms) {
            continue;
        }
        let push_seed = draws.rng.random::<u64>();
        let pushing = Pushing {
            pg: pg.clone(),
            redis: redis.clone(),
            events: events.clone(),
            caps: load.caps,
            now,
        };
        tokio::spawn(push_note(note, push_seed, pushing));
    }
}

/// One creator's seeded draws: when its notes come, whose they are, when
/// a remote one was published, which are deleted and when. Kept in one
/// place so that the draws stay in the order that makes a seed's run.
struct Draws {
    /// The notes' timing, authors, delays and push seeds, in that order per note.
    rng: ChaCha8Rng,
    /// The creator's process: its node ID is drawn from `rng` first.
    aidx: Aidx,
    /// A stream of its own, so that deleting leaves every other draw as it was.
    delete_rng: ChaCha8Rng,
    delete_after: Exp<f64>,
    /// Poisson arrivals: the creator's own exponential gaps.
    gap: Exp<f64>,
    remote_share: f64,
    arrival: Arrival,
    /// `--arrivals grid`: each creator on an exact period, offset from the
    /// others.
    grid: Option<WriterPace>,
}

impl Draws {
    /// The draws of the `index`th creator of `load`, its grid (if any)
    /// starting at `now()`.
    fn new(index: u32, load: &Load, now: fn() -> i64) -> Draws {
        let mut rng =
            ChaCha8Rng::seed_from_u64(since_id::seed::stream(load.seed, 0x4352_4541_5445, index));
        let aidx = Aidx::new(&mut rng);
        let delete_rng =
            ChaCha8Rng::seed_from_u64(since_id::seed::stream(load.seed, 0xde1e_7e00, index));
        let delete_after =
            Exp::new(1.0 / load.deletes.after_ms.max(1) as f64).expect("a positive mean");
        let per_creator = (load.local_rate_per_s + load.remote_rate_per_s) / load.creators as f64;
        let gap = Exp::new(per_creator.max(1e-9) / 1000.0).expect("a positive rate");
        let remote_share =
            load.remote_rate_per_s / (load.local_rate_per_s + load.remote_rate_per_s);
        let arrival = load.arrival();
        let grid = (load.arrivals == Arrivals::Grid).then(|| {
            let total = load.local_rate_per_s + load.remote_rate_per_s;
            WriterPace::of_writer(
                Arrivals::Grid,
                (index, load.creators),
                total,
                now(),
                load.seed,
            )
        });
        Draws {
            rng,
            aidx,
            delete_rng,
            delete_after,
            gap,
            remote_share,
            arrival,
            grid,
        }
    }

    /// How long to wait before the next note (an exponential gap is capped
    /// at a minute).
    fn wait_ms(&mut self, now: fn() -> i64) -> u64 {
        match &mut self.grid {
            Some(pace) => {
                let wait = pace.wait_ms(now() as f64);
                pace.wrote();
                wait
            }
            None => self.gap.sample(&mut self.rng).min(60_000.0) as u64,
        }
    }

    /// The next note, as its `create()` starts at `now()`: the note, its
    /// ID's time (a remote note's `published`, before its arrival), and
    /// when `create()` started.
    fn note(&mut self, load: &Load, now: fn() -> i64) -> (Note, i64, i64) {
        let rng = &mut self.rng;
        let remote = load.remote_users > 0 && rng.random_bool(self.remote_share.clamp(0.0, 1.0));
        let user = if remote {
            (load.local_users + rng.random_range(0..load.remote_users)) as i32
        } else {
            rng.random_range(0..load.local_users.max(1)) as i32
        };
        let started_ms = now();
        let created_at = if remote {
            started_ms - self.arrival.lateness_ms(rng)
        } else {
            started_ms
        };
        let note = Note {
            id: self.aidx.gen_at(created_at),
            user_id: user,
            is_local: !remote,
            has_files: rng.random_bool(0.2),
        };
        (note, created_at, started_ms)
    }

    /// When the note committed at `committed_ms` is deleted, if its author
    /// deletes it (`--delete-share`).
    fn deletion_due(&mut self, load: &Load, committed_ms: i64) -> Option<i64> {
        if load.deletes.share > 0.0 && self.delete_rng.random_bool(load.deletes.share.min(1.0)) {
            Some(committed_ms + self.delete_after.sample(&mut self.delete_rng) as i64)
        } else {
            None
        }
    }
}

/// What a note's push works with: its creator's handles.
struct Pushing<R> {
    pg: Arc<tokio_postgres::Client>,
    redis: R,
    events: mpsc::Sender<Event>,
    caps: Caps,
    now: fn() -> i64,
}

/// `pushToTl` for one note: its author's followers read, the lists it goes
/// to planned (seeded by `push_seed`) and written; what it did, or its
/// failure, is sent to the truth.
async fn push_note(note: Note, push_seed: u64, pushing: Pushing<impl RedisSource>) {
    let Pushing {
        pg,
        redis,
        events,
        caps,
        now,
    } = pushing;
    let result = async {
        let followers = store::followers(&pg, note.user_id).await?;
        let lists = push::lists_of(&note, &followers, &caps);
        let ops = push::plan(
            &note.id,
            &lists,
            now(),
            &mut ChaCha8Rng::seed_from_u64(push_seed),
        );
        let (generation, mut conn) = redis.conn();
        push::execute(&mut conn, &note.id, &ops, now)
            .await
            .inspect_err(|_| redis.failed(generation))
    }
    .await;
    let event = match result {
        Ok(report) => Event::Pushed {
            id: note.id,
            report,
        },
        Err(e) => Event::Failed(e),
    };
    let _ = events.send(event).await;
}

/// `NoteDeleteService.delete` at `due_ms` (unless the run stops first): the
/// row's `DELETE`, bracketed by when it was sent and when it returned. The
/// lists keep the ID; a page read from Redis drops it at the PostgreSQL
/// lookup (`read`).
async fn delete_at(
    due_ms: i64,
    id: String,
    pg: Arc<tokio_postgres::Client>,
    events: mpsc::Sender<Event>,
    mut stop: watch::Receiver<bool>,
    now: fn() -> i64,
) {
    let wait = (due_ms - now()).max(0) as u64;
    tokio::select! {
        _ = tokio::time::sleep(std::time::Duration::from_millis(wait)) => {}
        _ = stop.wait_for(|s| *s) => return,
    }
    let sent_ms = now();
    let event = match store::delete_note(&pg, &id).await {
        Ok(()) => Event::Deleted(rundb::FttDeleteRow {
            id,
            sent_at_ms: sent_ms,
            returned_at_ms: now(),
        }),
        Err(e) => Event::Failed(e),
    };
    let _ = events.send(event).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(seed: u64, graph_seed: u64) -> Load {
        let mut l = super::super::serve::serve_load(seed);
        l.graph_seed = graph_seed;
        l
    }

    /// `--graph-seed`: the graph follows it alone, so two run seeds share
    /// one graph; by default (the run's seed) seeds 1 and 2 draw two.
    #[test]
    fn the_follow_graph_follows_the_graph_seed() {
        assert_eq!(load(1, 7).follows(), load(2, 7).follows());
        assert_eq!(
            load(1, 7).remote_share_followed(),
            load(2, 7).remote_share_followed()
        );
        assert_ne!(load(1, 1).follows(), load(2, 2).follows());
        assert_ne!(
            load(1, 1).remote_share_followed(),
            load(2, 2).remote_share_followed()
        );
        let share = load(1, 1).remote_share_followed();
        assert!(share > 0.0 && share < 1.0, "{share}");
    }
}
