//! A timeline page's entries read for the four fields a poller keeps (the ID,
//! an integer ID, the creation time and the author), in one pass over the
//! bytes: every other field is skipped without being built. Building the
//! whole page as a tree of `serde_json::Value`s (a map per status, a string
//! per field) was most of the cost of reading a page of 200 statuses, and of
//! `experiment serve --record`, which reads every page it serves.
//!
//! Pure: bytes in, fields out. Each entry keeps the values of the fields it
//! wants as small `Value`s, so the rules for them (a string ID, an exact
//! integer, a JSON pointer to the author) stay in one place, `parse_item`.

use super::common::ItemFields;
use serde::Deserialize;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use std::fmt;

/// What one entry held of the wanted fields: each a small value (the author's
/// top-level field whole, e.g. Mastodon's `account`, for the pointer).
#[derive(Debug, Default)]
pub struct Entry {
    /// Empty for an entry that is not a JSON object.
    pub fields: Vec<(&'static str, Value)>,
}

impl Entry {
    /// The wanted field `name`, if present.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.fields.iter().find(|(k, _)| *k == name).map(|(_, v)| v)
    }

    /// The value at the JSON pointer `pointer` (`/account/acct`), if present.
    pub fn pointer(&self, pointer: &str) -> Option<&Value> {
        let rest = pointer.strip_prefix('/')?;
        let (top, below) = match rest.split_once('/') {
            Some((top, below)) => (top, Some(below)),
            None => (rest, None),
        };
        let value = self.get(top)?;
        match below {
            Some(below) => value.pointer(&format!("/{below}")),
            None => Some(value),
        }
    }
}

/// Where [`wanted`] puts the author's top-level key.
const AUTHOR_KEY: usize = 2;

/// The top-level keys an entry keeps: the ID, the integer ID, the creation
/// time, and the first segment of the author's pointer.
fn wanted(fields: &ItemFields) -> Vec<&'static str> {
    let author = fields.author.trim_start_matches('/');
    let author_top = author.split('/').next().unwrap_or(author);
    // The author's key at [`AUTHOR_KEY`].
    let mut keys = vec![fields.id, fields.created_at, author_top];
    keys.extend(fields.integer_id);
    keys
}

/// The author's pointer below its top-level key (`/user/id_str`: `["id_str"]`).
fn author_path(fields: &ItemFields) -> Vec<&'static str> {
    let mut segments = fields.author.trim_start_matches('/').split('/');
    segments.next();
    segments.filter(|s| !s.is_empty()).collect()
}

/// Reads a JSON array of entries, keeping only the wanted fields of each.
pub fn read(fields: &ItemFields, body: &[u8]) -> Result<Vec<Entry>, serde_json::Error> {
    let keys = wanted(fields);
    let author = author_path(fields);
    let mut de = serde_json::Deserializer::from_slice(body);
    let entries = Entries {
        keys: &keys,
        author_top: keys[AUTHOR_KEY],
        author_path: &author,
    }
    .deserialize(&mut de)?;
    de.end()?;
    Ok(entries)
}

#[derive(Clone, Copy)]
struct Entries<'k> {
    keys: &'k [&'static str],
    /// The author's top-level key, kept only along `author_path`: a
    /// Twitter user object is most of a tweet, and building it whole was most
    /// of the cost of `experiment serve --record`.
    author_top: &'static str,
    author_path: &'k [&'static str],
}

impl<'de> DeserializeSeed<'de> for Entries<'_> {
    type Value = Vec<Entry>;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Vec<Entry>, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Entries<'_> {
    type Value = Vec<Entry>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON array of statuses")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<Entry>, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1024));
        while let Some(entry) = seq.next_element_seed(OneEntry(self))? {
            out.push(entry);
        }
        Ok(out)
    }
}

struct OneEntry<'k>(Entries<'k>);

impl<'de> DeserializeSeed<'de> for OneEntry<'_> {
    type Value = Entry;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Entry, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for OneEntry<'_> {
    type Value = Entry;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a status")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entry, A::Error> {
        let mut entry = Entry {
            fields: Vec::with_capacity(self.0.keys.len()),
        };
        while let Some(key) = map.next_key_seed(Key { keys: self.0.keys })? {
            match key {
                // A repeated key: the last one wins, as in a `Value` map.
                Some(name) => {
                    let value: Value = if name == self.0.author_top {
                        map.next_value_seed(Along(self.0.author_path))?
                    } else {
                        map.next_value()?
                    };
                    entry.fields.retain(|(k, _)| *k != name);
                    entry.fields.push((name, value));
                }
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(entry)
    }

    // Anything but an object is an entry without the fields.
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Entry, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Entry::default())
    }

    fn visit_bool<E>(self, _: bool) -> Result<Entry, E> {
        Ok(Entry::default())
    }

    fn visit_i64<E>(self, _: i64) -> Result<Entry, E> {
        Ok(Entry::default())
    }

    fn visit_u64<E>(self, _: u64) -> Result<Entry, E> {
        Ok(Entry::default())
    }

    fn visit_f64<E>(self, _: f64) -> Result<Entry, E> {
        Ok(Entry::default())
    }

    fn visit_str<E>(self, _: &str) -> Result<Entry, E> {
        Ok(Entry::default())
    }

    fn visit_unit<E>(self) -> Result<Entry, E> {
        Ok(Entry::default())
    }
}

/// A value kept only along a path of keys: an object holds just the key the
/// path names (itself kept along the rest), anything else is kept whole, so
/// a JSON pointer along the path finds in it what it finds in the whole.
struct Along<'p>(&'p [&'static str]);

impl<'de> DeserializeSeed<'de> for Along<'_> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        match self.0 {
            [] => Value::deserialize(d),
            _ => d.deserialize_any(self),
        }
    }
}

impl<'de> Visitor<'de> for Along<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let (first, rest) = self.0.split_first().expect("a non-empty path");
        let mut kept = serde_json::Map::new();
        while let Some(key) = map.next_key_seed(Key { keys: &[*first] })? {
            match key {
                Some(name) => {
                    kept.insert(name.to_string(), map.next_value_seed(Along(rest))?);
                }
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Value::Object(kept))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
}

/// A key: which wanted field it is, or `None`, compared without allocating.
struct Key<'k> {
    keys: &'k [&'static str],
}

impl<'de> DeserializeSeed<'de> for Key<'_> {
    type Value = Option<&'static str>;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key<'_> {
    type Value = Option<&'static str>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a key")
    }

    fn visit_str<E>(self, key: &str) -> Result<Self::Value, E> {
        Ok(self.keys.iter().copied().find(|k| *k == key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIELDS: ItemFields = ItemFields {
        id: "id",
        integer_id: None,
        created_at: "created_at",
        author: "/account/acct",
    };

    #[test]
    fn only_the_wanted_fields_are_kept_and_the_rest_skipped() {
        let body = br#"[{"id":"9","content":"<p>x</p>","tags":[{"name":"a"}],
                        "account":{"id":"3","acct":"user3"},"created_at":"t","id":"10"},
                       7, {"other": {"id": "nested"}}]"#;
        let entries = read(&FIELDS, body).unwrap();
        assert_eq!(entries.len(), 3);
        assert_eq!(
            entries[0].get("id"),
            Some(&Value::from("10")),
            "the last key wins"
        );
        assert_eq!(
            entries[0].pointer("/account/acct"),
            Some(&Value::from("user3"))
        );
        assert_eq!(entries[0].get("content"), None);
        assert_eq!(
            entries[0].get("account"),
            Some(&serde_json::json!({"acct": "user3"})),
            "the author's object is kept along its pointer only"
        );
        assert!(entries[1].fields.is_empty());
        assert_eq!(entries[2].get("id"), None, "a nested id is not the entry's");
        assert!(read(&FIELDS, b"[1] trailing").is_err());
        assert!(read(&FIELDS, b"{\"id\": 1}").is_err());
    }
}
