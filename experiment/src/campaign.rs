//! A campaign's plan (`experiment sweep --target postgres|mariadb|misskey-ftt`,
//! docs/campaigns.md): the `--vary KEY=V1,V2,...` options, every combination
//! of their values, each combination's run flags and each run's database
//! under `--out`. Pure: no I/O and no clock; the command runs the plan and
//! `analysis::campaign` judges and sums it up.
//!
//! A run's flags are kept as (flag, value) pairs, as the command line gave
//! them (`targets::GivenRun`), so that a combination replaces a flag's
//! value rather than adding a second one.

use std::path::{Path, PathBuf};

/// A run flag as given: `--interval` with `Some("1s")`, or `--no-x` alone.
pub type FlagPair = (String, Option<String>);

/// Run flags a campaign sets itself or holds fixed: never varied.
const FIXED: [&str; 5] = ["target", "seed", "db", "clock", "start"];

/// The repeatable run flags whose `--vary` value names a set of them:
/// several `+`-joined (`incrementing+kafka-connect`), or `none` for none.
/// `none` never means the target's default pollers: a combination left with
/// no poller of either kind runs the writers alone (`--no-pollers`). A
/// poller's footprint is measured by varying the set around it, with the
/// writers alone as the control, in one interleaved campaign.
const SETS: [&str; 2] = ["poller", "id-poller"];

/// One `--vary`: a run flag (`interval`) or a `--set` key (`set:NAME`), and
/// the values it takes, in the order given.
#[derive(Clone, Debug, PartialEq)]
pub struct Vary {
    pub key: String,
    pub values: Vec<String>,
}

/// Reads `--vary KEY=V1,V2,...`. `takes_value(name)` says whether `--name`
/// is a run flag with a value (`targets::run_flag`).
pub fn parse_vary(text: &str, takes_value: impl Fn(&str) -> Option<bool>) -> Result<Vary, String> {
    let (key, values) = text
        .split_once('=')
        .ok_or_else(|| format!("bad --vary '{text}': expected KEY=V1,V2,..."))?;
    let key = key.trim_start_matches("--");
    let values: Vec<String> = values.split(',').map(str::to_string).collect();
    if values.iter().any(|v| v.is_empty()) {
        return Err(format!("bad --vary '{text}': an empty value"));
    }
    if let Some(name) = key.strip_prefix("set:") {
        if name.is_empty() || name.contains('=') {
            return Err(format!("bad --vary '{text}': expected set:NAME=V1,V2,..."));
        }
    } else if FIXED.contains(&key) {
        return Err(format!(
            "--vary {key}: a campaign sets --{key} itself (one target, --seeds, a database per run under --out, real time)"
        ));
    } else {
        match takes_value(key) {
            Some(true) => {}
            Some(false) => return Err(format!("--vary {key}: --{key} takes no value")),
            None => {
                return Err(format!(
                    "--vary: unknown key '{key}' (a run flag such as interval or limit, or set:NAME for a --set key)"
                ));
            }
        }
    }
    Ok(Vary {
        key: key.to_string(),
        values,
    })
}

/// One combination of the varied values: `key=value` for each `--vary`.
#[derive(Clone, Debug, PartialEq)]
pub struct Combination {
    pub settings: Vec<(String, String)>,
}

impl Combination {
    /// `interval=1s,limit=200`; empty without `--vary`.
    pub fn label(&self) -> String {
        self.settings
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// `base` with this combination's values: a flag's given value is
    /// replaced, a `--set NAME=...` replaced by the combination's, and a
    /// set of pollers ([`SETS`]) replaces every one given.
    pub fn apply(&self, base: &[FlagPair]) -> Vec<FlagPair> {
        let mut flags = base.to_vec();
        for (key, value) in &self.settings {
            match key.strip_prefix("set:") {
                Some(name) => {
                    let prefix = format!("{name}=");
                    flags.retain(|(f, v)| {
                        !(f == "--set" && v.as_deref().is_some_and(|v| v.starts_with(&prefix)))
                    });
                    flags.push(("--set".into(), Some(format!("{name}={value}"))));
                }
                None => {
                    let flag = format!("--{key}");
                    flags.retain(|(f, _)| *f != flag);
                    let values: Vec<&str> = match SETS.contains(&key.as_str()) {
                        true if value == "none" => Vec::new(),
                        true => value.split('+').collect(),
                        false => vec![value],
                    };
                    flags.extend(values.into_iter().map(|v| (flag.clone(), Some(v.into()))));
                }
            }
        }
        let emptied = self
            .settings
            .iter()
            .any(|(k, v)| SETS.contains(&k.as_str()) && v == "none");
        let pollers = |f: &FlagPair| SETS.iter().any(|k| f.0 == format!("--{k}"));
        if emptied && !flags.iter().any(pollers) {
            flags.push(("--no-pollers".into(), None));
        }
        flags
    }

    /// The database of `seed`'s run under `out`: `out/seed-N.db` without
    /// `--vary`, else `out/<label>/seed-N.db` (the label's characters other
    /// than letters, digits and `._=-` as `_`).
    pub fn db(&self, out: &Path, seed: u64) -> PathBuf {
        let file = format!("seed-{seed}.db");
        if self.settings.is_empty() {
            return out.join(file);
        }
        let dir: String = self
            .label()
            .chars()
            .map(|c| match c {
                c if c.is_ascii_alphanumeric() || "._=-".contains(c) => c,
                _ => '_',
            })
            .collect();
        out.join(dir).join(file)
    }
}

/// Every combination of the varied values, the first `--vary` outermost;
/// one empty combination without any.
pub fn combinations(varies: &[Vary]) -> Vec<Combination> {
    let mut all = vec![Combination {
        settings: Vec::new(),
    }];
    for vary in varies {
        all = all
            .into_iter()
            .flat_map(|c| {
                vary.values.iter().map(move |v| {
                    let mut settings = c.settings.clone();
                    settings.push((vary.key.clone(), v.clone()));
                    Combination { settings }
                })
            })
            .collect();
    }
    all
}

/// Flags as argv: `--interval 1s --no-x ...`.
pub fn argv(flags: &[FlagPair]) -> Vec<String> {
    flags
        .iter()
        .flat_map(|(f, v)| std::iter::once(f.clone()).chain(v.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(name: &str) -> Option<bool> {
        match name {
            "interval" | "limit" | "set" | "poller" | "id-poller" => Some(true),
            "dry-run" => Some(false),
            _ => None,
        }
    }

    #[test]
    fn a_vary_names_a_run_flag_with_a_value_or_a_set_key() {
        assert_eq!(
            parse_vary("interval=1s,2s", flags).unwrap(),
            Vary {
                key: "interval".into(),
                values: vec!["1s".into(), "2s".into()]
            }
        );
        assert_eq!(parse_vary("set:tail=0,1", flags).unwrap().key, "set:tail");
        for bad in [
            "interval",
            "interval=1s,",
            "nosuch=1",
            "dry-run=1",
            "seed=1,2",
            "db=a",
            "set:=1",
        ] {
            let e = parse_vary(bad, flags).unwrap_err();
            assert!(!e.contains('\n'), "{bad}: {e}");
        }
        assert!(
            parse_vary("nosuch=1", flags)
                .unwrap_err()
                .contains("unknown key")
        );
    }

    #[test]
    fn every_combination_times_each_replaces_the_given_value() {
        let varies = [
            parse_vary("interval=1s,2s", flags).unwrap(),
            parse_vary("set:tail=0,1", flags).unwrap(),
        ];
        let all = combinations(&varies);
        let labels: Vec<String> = all.iter().map(Combination::label).collect();
        assert_eq!(
            labels,
            [
                "interval=1s,set:tail=0",
                "interval=1s,set:tail=1",
                "interval=2s,set:tail=0",
                "interval=2s,set:tail=1"
            ]
        );
        let base: Vec<FlagPair> = vec![
            ("--interval".into(), Some("5s".into())),
            ("--set".into(), Some("tail=9".into())),
            ("--set".into(), Some("rate=3".into())),
            ("--dry-run".into(), None),
        ];
        assert_eq!(
            argv(&all[3].apply(&base)),
            [
                "--set",
                "rate=3",
                "--dry-run",
                "--interval",
                "2s",
                "--set",
                "tail=1"
            ]
        );
        let out = Path::new("out");
        assert_eq!(
            all[1].db(out, 3),
            out.join("interval=1s_set_tail=1/seed-3.db")
        );
        assert_eq!(combinations(&[])[0].db(out, 3), out.join("seed-3.db"));
        assert_eq!(combinations(&[]).len(), 1);
    }

    /// A poller set: each `+`-joined poller is one flag, `none` none, and
    /// either replaces every one given; a flag that is no set keeps its `+`.
    #[test]
    fn a_poller_set_replaces_every_poller_given() {
        let varies = [parse_vary("id-poller=none,incrementing+behind:n=20", flags).unwrap()];
        let all = combinations(&varies);
        let base: Vec<FlagPair> = vec![
            ("--poller".into(), Some("naive".into())),
            ("--id-poller".into(), Some("kafka-connect".into())),
        ];
        assert_eq!(argv(&all[0].apply(&base)), ["--poller", "naive"]);
        assert_eq!(
            argv(&all[1].apply(&base)),
            [
                "--poller",
                "naive",
                "--id-poller",
                "incrementing",
                "--id-poller",
                "behind:n=20"
            ]
        );
        assert_eq!(
            all[1].db(Path::new("out"), 1),
            Path::new("out").join("id-poller=incrementing_behind_n=20/seed-1.db")
        );
        // No poller of either kind left: the writers alone, never the defaults.
        let both = [
            parse_vary("poller=none", flags).unwrap(),
            parse_vary("id-poller=none,incrementing", flags).unwrap(),
        ];
        let alone = combinations(&both);
        assert_eq!(argv(&alone[0].apply(&base)), ["--no-pollers"]);
        assert_eq!(
            argv(&alone[1].apply(&base)),
            ["--id-poller", "incrementing"]
        );
        let one = combinations(&[parse_vary("limit=1+2", flags).unwrap()]);
        assert_eq!(argv(&one[0].apply(&base))[4..], ["--limit", "1+2"]);
    }
}
