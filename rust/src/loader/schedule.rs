//! `pltlab-dp schedule`: the loader's scheduler (scheduler.rs with policy.rs) driven by a
//! modelled network instead of sockets: `pltlab predict` (src/pltlab/predict/simulate.py) feeds
//! it what its model says happens and carries out the actions it returns, so a prediction
//! requests exactly the objects, in exactly the order and on exactly the connections, that
//! `pltlab-dp load` would over a network that behaved as modelled.
//!
//! One JSON object per line, both ways (docs/dataplane-interfaces.md):
//! * in: the plan (`pltlab-dp schema plan`), not answered; then steps (`schedule-step`): the
//!   first `{"now": T}` starts the load, every later one is `{"now": T, "event": EVENT}`
//!   (events.rs), `now` in ms since the load started, never decreasing;
//! * out: one `schedule-reply` per step: the actions, in order, whether every object has
//!   arrived, and (to the first step) each pool's first object; at the end of the input, one
//!   `schedule-end`: when each object became ready and was released.
//!
//! A bad line or an event naming an object, connection, pool or phase that does not exist is an
//! error (exit 1, one line on stderr), before the scheduler sees it.
use anyhow::{bail, Context, Result};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::io::{BufRead, Write};

use super::events::{Action, Event, Timer};
use super::plan::Plan;
use super::scheduler::Scheduler;

#[derive(clap::Args)]
pub struct Args {}

/// `pltlab-dp schedule`: one step of the load (one line of its input, after the plan).
#[derive(Deserialize, Debug, Clone, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Step {
    /// Ms since the load started (never less than the step before's).
    pub now: f64,
    /// What happened; none: the load starts (the first step, and only it).
    #[serde(default)]
    pub event: Option<Event>,
}

/// `pltlab-dp schedule`: the answer to one step.
#[derive(Serialize, Debug, Clone, JsonSchema)]
pub struct Reply {
    /// What the network's driver does, in order (connections numbered from 0 as opened).
    pub actions: Vec<Action>,
    /// Every object has arrived.
    pub done: bool,
    /// To the first step only: each pool's first object (its host, address and scheme are the
    /// pool's connections').
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pools: Option<Vec<usize>>,
}

/// `pltlab-dp schedule`: the last line, once the input has ended.
#[derive(Serialize, Debug, Clone, JsonSchema)]
pub struct End {
    /// Every object has arrived.
    pub done: bool,
    /// Per object: when it became ready (prerequisites met, delay over), ms.
    pub ready_ms: Vec<f64>,
    /// Per object: when the policy let it go to its pool (= ready_ms unless held), ms.
    pub released_ms: Vec<f64>,
}

/// The scheduler of one plan and what it has been told so far.
pub struct Session {
    sched: Scheduler,
    objects: usize,
    phases: usize,
    conns: usize,
    now: Option<f64>,
}

impl Session {
    pub fn new(plan: &Plan) -> Result<Session> {
        plan.validate()?;
        let phases = plan.tight_phases.len() + usize::from(!plan.tight_until.is_empty());
        Ok(Session { sched: Scheduler::new(plan), objects: plan.objects.len(), phases, conns: 0, now: None })
    }

    /// One step: its reply, or why the step is impossible.
    pub fn step(&mut self, s: &Step) -> Result<Reply> {
        if !s.now.is_finite() || self.now.is_some_and(|t| s.now < t) {
            bail!("now {} is before the step before's", s.now);
        }
        let (actions, pools) = match (self.now, s.event) {
            (None, None) => {
                let pools = (0..self.sched.pools()).map(|p| self.sched.pool_object(p)).collect();
                (self.sched.start(s.now), Some(pools))
            }
            (None, Some(_)) => bail!("the first step starts the load: {{\"now\": T}} without an event"),
            (Some(_), None) => bail!("the load has started already: a step needs an event"),
            (Some(_), Some(ev)) => {
                self.check(ev)?;
                (self.sched.handle(s.now, ev), None)
            }
        };
        self.now = Some(s.now);
        self.conns += actions.iter().filter(|a| matches!(a, Action::Open { .. })).count();
        Ok(Reply { actions, done: self.sched.is_done(), pools })
    }

    /// The indices an event names exist.
    fn check(&self, ev: Event) -> Result<()> {
        let (objects, conns, pools) = (self.objects, self.conns, self.sched.pools());
        let bad = |what: &str, i: usize, n: usize| -> Result<()> {
            if i >= n {
                bail!("{ev:?}: no {what} {i} ({n} so far)");
            }
            Ok(())
        };
        match ev {
            Event::Timer(Timer::Ready(i)) | Event::FirstByte(i) => bad("object", i, objects),
            Event::Timer(Timer::Dns(p)) => bad("pool", p, pools),
            Event::Timer(Timer::TightEnd(k)) => bad("tight phase", k, self.phases),
            Event::Connected(c) | Event::ConnectedH2(c) | Event::Closed(c) | Event::Done { conn: c, .. } => {
                bad("connection", c, conns)
            }
            Event::StreamDone { conn, object } => bad("connection", conn, conns).and(bad("object", object, objects)),
        }
    }

    pub fn end(&self) -> End {
        End {
            done: self.sched.is_done(),
            ready_ms: (0..self.objects).map(|i| self.sched.ready_ms(i)).collect(),
            released_ms: (0..self.objects).map(|i| self.sched.released_ms(i)).collect(),
        }
    }
}

/// Plan and steps from `input`, replies and the end to `out` (each line flushed: the client
/// waits for it).
pub fn serve(input: impl BufRead, mut out: impl Write) -> Result<()> {
    let mut lines = input.lines();
    let plan = lines.next().context("no plan (the first line)")??;
    let plan: Plan = serde_json::from_str(&plan).context("bad plan")?;
    let mut session = Session::new(&plan).context("bad plan")?;
    for (n, line) in lines.enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let step: Step = serde_json::from_str(&line).with_context(|| format!("step {}: bad step", n + 1))?;
        let reply = session.step(&step).with_context(|| format!("step {}", n + 1))?;
        serde_json::to_writer(&mut out, &reply)?;
        out.write_all(b"\n")?;
        out.flush()?;
    }
    serde_json::to_writer(&mut out, &session.end())?;
    out.write_all(b"\n")?;
    out.flush()?;
    Ok(())
}

pub fn run(_a: Args) -> Result<()> {
    serve(std::io::stdin().lock(), std::io::stdout().lock())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn plan() -> String {
        let o = |url: &str, parent: Value, delayable: bool| json!({"url": url, "host": "a", "ip": "10.0.0.1", "port": 80, "parent": parent, "delayable": delayable});
        json!({
            "objects": [o("http://a/", Value::Null, false), o("http://a/s.js", json!(0), false),
                        o("http://a/1.png", json!(0), true), o("http://a/2.png", json!(0), true)],
            "tight_limit": 1, "tight_until": [1],
        })
        .to_string()
    }

    fn talk(lines: &[Value]) -> Result<Vec<Value>> {
        let mut input = plan() + "\n";
        for l in lines {
            input += &(l.to_string() + "\n");
        }
        let mut out = Vec::new();
        serve(input.as_bytes(), &mut out)?;
        Ok(String::from_utf8(out)?.lines().map(|l| serde_json::from_str(l).unwrap()).collect())
    }

    /// The scheduler over JSON lines: the Chromium model's tight mode holds the second image
    /// until the script arrived; the end says when each object was ready and released.
    #[test]
    fn steps_and_replies() {
        let got = talk(&[
            json!({"now": 0.0}),
            json!({"now": 1.0, "event": {"connected": 0}}),
            json!({"now": 2.0, "event": {"done": {"conn": 0, "keep_alive": true}}}),
            json!({"now": 3.0, "event": {"done": {"conn": 0, "keep_alive": true}}}),
        ])
        .unwrap();
        assert_eq!(
            got[0],
            json!({"actions": [{"open": {"conn": 0, "pool": 0, "dns_end_ms": 0.0}}], "done": false, "pools": [0]})
        );
        assert_eq!(got[1]["actions"], json!([{"send": {"conn": 0, "object": 0}}]));
        // the script ahead of the image; image 2 held (tight_limit 1), one more connection for image 1
        assert_eq!(
            got[2]["actions"],
            json!([{"send": {"conn": 0, "object": 1}}, {"open": {"conn": 1, "pool": 0, "dns_end_ms": 0.0}}])
        );
        // the script arrived: image 2 released; the freed connection takes the head of the queue
        assert_eq!(got[3]["actions"], json!([{"send": {"conn": 0, "object": 2}}]));
        assert_eq!(got[4]["done"], false);
        assert_eq!(got[4]["ready_ms"], json!([0.0, 2.0, 2.0, 2.0]));
        assert_eq!(got[4]["released_ms"], json!([0.0, 2.0, 2.0, 3.0]));
    }

    #[test]
    fn bad_steps_are_refused() {
        let start = json!({"now": 0.0});
        for (lines, needle) in [
            (vec![json!({"now": 0.0, "event": {"connected": 0}})], "first step starts"),
            (vec![start.clone(), start.clone()], "started already"),
            (vec![start.clone(), json!({"now": 1.0, "event": {"connected": 1}})], "no connection 1"),
            (vec![start.clone(), json!({"now": 1.0, "event": {"first_byte": 9}})], "no object 9"),
            (vec![start.clone(), json!({"now": 1.0, "event": {"timer": {"tight_end": 1}}})], "no tight phase 1"),
            (vec![start.clone(), json!({"now": -1.0, "event": {"connected": 0}})], "before the step before"),
            (vec![start.clone(), json!({"now": 1.0, "event": {"conected": 0}})], "unknown variant `conected`"),
            (vec![start.clone(), json!({"now": 1.0, "evnt": {"connected": 0}})], "unknown field `evnt`"),
            (
                vec![json!({"now": 0.0}), json!({"now": 1, "event": {"done": {"conn": 0, "keepalive": true}}})],
                "keepalive",
            ),
        ] {
            let e = format!("{:#}", talk(&lines).unwrap_err());
            assert!(e.contains(needle), "{lines:?}: {e}");
        }
        let mut out = Vec::new();
        let e = format!("{:#}", serve(&b"{\"objects\": []}\n"[..], &mut out).unwrap_err());
        assert!(e.contains("no objects"), "{e}");
    }
}
