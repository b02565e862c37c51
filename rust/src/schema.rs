//! `pltlab-dp schema [NAME]`: the JSON Schema (draft 2020-12) of every document between the control
//! plane and the data plane, generated from the Rust types that read or write it. Inputs are
//! described as they are read (optional keys with their defaults; an unknown key is refused:
//! every input struct has `deny_unknown_fields`), outputs as they are written.
use anyhow::{bail, Result};
use schemars::generate::SchemaSettings;
use schemars::JsonSchema;
use serde_json::{Map, Value};

use crate::{link, loader, probe, replay};

#[derive(clap::Args)]
pub struct Args {
    /// One document's schema (without: every one, as an object NAME -> schema).
    pub name: Option<String>,
}

/// Is the document read by pltlab-dp (input) or written by it (output)?
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Way {
    Input,
    Output,
}

/// A document: its name (`pltlab-dp schema NAME`), way, what reads or writes it, its schema.
pub struct Document {
    pub name: &'static str,
    pub way: Way,
    pub what: &'static str,
    pub schema: fn() -> Value,
}

const fn doc(name: &'static str, way: Way, what: &'static str, schema: fn() -> Value) -> Document {
    Document { name, way, what, schema }
}

pub const DOCUMENTS: &[Document] = &[
    doc("link-config", Way::Input, "pltlab-dp link --config", input::<link::config::Config>),
    doc("manifest", Way::Input, "pltlab-dp replay --manifest", input::<replay::manifest::Manifest>),
    doc("plan", Way::Input, "pltlab-dp load --plan", input::<loader::plan::Plan>),
    doc(
        "schedule-step",
        Way::Input,
        "pltlab-dp schedule: one step (a line after the plan)",
        input::<loader::schedule::Step>,
    ),
    doc("link-stats", Way::Output, "pltlab-dp link: final statistics", output::<link::stats::LinkStats>),
    doc("link-snapshot", Way::Output, "pltlab-dp link: SIGUSR1 snapshot", output::<link::stats::Snapshot>),
    doc(
        "link-unimpaired",
        Way::Output,
        "pltlab-dp link: SIGUSR2, unimpaired or not",
        output::<link::stats::Unimpaired>,
    ),
    doc("replay-stats", Way::Output, "pltlab-dp replay: statistics and snapshots", output::<replay::report::Report>),
    doc("load-report", Way::Output, "pltlab-dp load: the load report", output::<loader::output::Output>),
    doc("schedule-reply", Way::Output, "pltlab-dp schedule: the answer to a step", output::<loader::schedule::Reply>),
    doc("schedule-end", Way::Output, "pltlab-dp schedule: the last line", output::<loader::schedule::End>),
    doc("probe-ping", Way::Output, "pltlab-dp probe ping", output::<probe::ping::Out>),
    doc("probe-fetch", Way::Output, "pltlab-dp probe fetch", output::<probe::fetch::Out>),
    doc("probe-bulk", Way::Output, "pltlab-dp probe bulk", output::<probe::bulk::Out>),
    doc("probe-udp", Way::Output, "pltlab-dp probe udp", output::<probe::udp::Out>),
];

fn input<T: JsonSchema>() -> Value {
    SchemaSettings::draft2020_12().for_deserialize().into_generator().into_root_schema_for::<T>().to_value()
}

fn output<T: JsonSchema>() -> Value {
    SchemaSettings::draft2020_12().for_serialize().into_generator().into_root_schema_for::<T>().to_value()
}

/// The schema of one document, or None for an unknown name.
pub fn of(name: &str) -> Option<Value> {
    DOCUMENTS.iter().find(|d| d.name == name).map(|d| annotate((d.schema)(), d.way, d.what))
}

/// Every document's schema by name.
pub fn all() -> Map<String, Value> {
    DOCUMENTS.iter().map(|d| (d.name.to_string(), annotate((d.schema)(), d.way, d.what))).collect()
}

/// Says on the schema what the document is (`x-pltlab-way`: "input" or "output").
fn annotate(mut v: Value, way: Way, what: &str) -> Value {
    if let Some(o) = v.as_object_mut() {
        o.insert("x-pltlab-document".into(), what.into());
        o.insert("x-pltlab-way".into(), if way == Way::Input { "input" } else { "output" }.into());
    }
    v
}

pub fn run(a: Args) -> Result<()> {
    let v = match a.name.as_deref() {
        None => Value::Object(all()),
        Some(n) => match of(n) {
            Some(v) => v,
            None => {
                let names: Vec<&str> = DOCUMENTS.iter().map(|d| d.name).collect();
                bail!("no document {n:?}: one of {}", names.join(", "));
            }
        },
    };
    println!("{}", serde_json::to_string_pretty(&v)?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(name: &str) -> Map<String, Value> {
        let s = of(name).unwrap();
        s["properties"].as_object().unwrap().clone()
    }

    #[test]
    fn every_document_has_a_schema() {
        let all = all();
        assert_eq!(all.len(), DOCUMENTS.len());
        for (name, s) in &all {
            assert_eq!(s["$schema"], "https://json-schema.org/draft/2020-12/schema", "{name}");
            assert_eq!(s["type"], "object", "{name}");
        }
        assert!(of("nothing").is_none());
    }

    /// Every object of an input schema refuses unknown keys (`additionalProperties: false`), at
    /// the top and in every definition.
    #[test]
    fn inputs_refuse_unknown_keys() {
        fn objects(v: &Value, out: &mut Vec<Value>) {
            match v {
                Value::Object(o) => {
                    if o.get("type") == Some(&Value::from("object")) && o.contains_key("properties") {
                        out.push(v.clone());
                    }
                    o.values().for_each(|x| objects(x, out));
                }
                Value::Array(a) => a.iter().for_each(|x| objects(x, out)),
                _ => {}
            }
        }
        for Document { name, way, .. } in DOCUMENTS {
            if *way != Way::Input {
                continue;
            }
            let mut found = Vec::new();
            objects(&of(name).unwrap(), &mut found);
            assert!(found.len() >= 3, "{name}: {} objects", found.len());
            for o in found {
                assert_eq!(o["additionalProperties"], false, "{name}: {o}");
            }
        }
    }

    /// The limits the data plane checks are in the schema, from the same constants.
    #[test]
    fn limits_and_defaults_are_in_the_schema() {
        let l = props("link-config");
        assert_eq!(l["busy_wait_us"]["maximum"], link::config::MAX_WAIT_US);
        assert_eq!(l["busy_wait_us"]["default"], 300);
        assert_eq!(l["offload"]["default"], true);
        let m = props("manifest");
        assert_eq!(m["request_timeout_ms"]["maximum"], replay::manifest::MAX_REQUEST_TIMEOUT_MS);
        assert_eq!(m["request_timeout_ms"]["minimum"], 1);
        assert_eq!(m["h2_priority"]["default"], "round-robin");
        assert_eq!(m["keep_alive"]["default"], true);
        let q = &of("manifest").unwrap()["$defs"]["QuicSettings"]["properties"];
        assert_eq!(q["initial_window_packets"]["maximum"], replay::manifest::MAX_INITIAL_WINDOW_PACKETS);
        assert_eq!(q["initial_window_packets"]["minimum"], 2);
        assert_eq!(q["max_connections"]["maximum"], replay::manifest::MAX_QUIC_CONNECTIONS);
        assert_eq!(q["cc"]["default"], "cubic");
        let listen = &of("manifest").unwrap()["$defs"]["Listen"]["properties"];
        assert_eq!(listen["transport"]["default"], "tcp");
        assert_eq!(listen["alpn"]["items"]["enum"], serde_json::json!(replay::manifest::ALPN_PROTOCOLS));
        let p = props("plan");
        assert_eq!(p["tls_mode"]["enum"], serde_json::json!(loader::plan::TLS_MODES));
        assert_eq!(p["max_conns_per_host"]["default"], 6);
    }

    #[test]
    fn outputs_name_every_counter() {
        let r = props("replay-stats");
        for k in [
            "requests",
            "tls_full_used",
            "h2_streams",
            "h1_requests",
            "tfo_tls_hello_split",
            "quic_early_used",
            "h3_streams",
            "quic_initial_bytes_max",
            "service_us",
        ] {
            assert!(r.contains_key(k), "{k}");
        }
        // what the server prints has exactly the schema's keys
        let printed = replay::stats::Stats::default().json();
        let mut keys: Vec<_> = printed.as_object().unwrap().keys().cloned().collect();
        let mut want: Vec<_> = r.keys().cloned().collect();
        keys.sort();
        want.sort();
        assert_eq!(keys, want);
        assert!(props("link-stats").contains_key("late_events"));
        assert!(props("load-report").contains_key("connections"));
    }
}
