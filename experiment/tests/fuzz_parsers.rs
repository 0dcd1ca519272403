//! The response parsers never panic, whatever a server sends: arbitrary
//! bytes, and arbitrary JSON shaped like a timeline. Failures proptest finds
//! are kept next to this file (`fuzz_parsers.proptest-regressions`, proptest's
//! place for a file outside `src/`) and replayed first on every run.

use proptest::prelude::*;
use serde_json::{Value, json};
use since_id::id::Layout;
use snowleak::api::Dialect;

fn dialects() -> Vec<(Dialect, Layout)> {
    vec![
        (
            Dialect::TwitterV1 {
                list_id: "1".into(),
            },
            Layout::twitter(),
        ),
        (
            Dialect::Mastodon {
                timeline: "public".into(),
            },
            "mastodon".parse().unwrap(),
        ),
        (
            Dialect::Misskey {
                endpoint: "local-timeline".into(),
            },
            "misskey-aidx".parse().unwrap(),
        ),
        (
            Dialect::Misskey {
                endpoint: "local-timeline".into(),
            },
            "ulid".parse().unwrap(),
        ),
    ]
}

fn json_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        "[0-9a-zA-Z-]{0,30}".prop_map(Value::from),
        "[0-9]{15,25}".prop_map(Value::from),
    ]
}

fn item() -> impl Strategy<Value = Value> {
    (json_leaf(), json_leaf(), json_leaf(), json_leaf()).prop_map(|(id, id_str, created, user)| {
        json!({ "id": id, "id_str": id_str, "created_at": created, "createdAt": created,
                "user": { "screen_name": user, "username": user }, "account": { "acct": user } })
    })
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(body in proptest::collection::vec(any::<u8>(), 0..512)) {
        for (dialect, layout) in dialects() {
            let _ = dialect.parse(&layout, &body);
        }
    }

    #[test]
    fn arbitrary_timelines_never_panic(items in proptest::collection::vec(item(), 0..20)) {
        let body = serde_json::to_vec(&Value::Array(items)).unwrap();
        for (dialect, layout) in dialects() {
            if let Ok(parsed) = dialect.parse(&layout, &body) {
                // Whatever parses has IDs valid in the layout, exactly as written.
                for item in parsed {
                    prop_assert_eq!(layout.parse(&item.id_text).unwrap(), item.id);
                }
            }
        }
    }
}
