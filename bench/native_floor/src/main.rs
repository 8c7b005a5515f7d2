//! The native floor of a copy: consume -> produce over librdkafka (the rdkafka crate), no Python and no
//! bookkeeping beyond a delivery count; the same batching as transcoder's lane. It copies `count` records
//! (key, value, headers, timestamp, partition) and exits 0 once all are acknowledged, 1 if any failed.
//!
//!     native_floor BOOTSTRAP SOURCE DESTINATION CODEC COUNT BATCH_BYTES LINGER_MS
//!
//! What it shows (bench/copiers.py runs it as the `native-floor` copier): the CPU and records/s a compiled
//! per-record loop over librdkafka reaches on this machine, against transcoder's Python lane and MirrorMaker 2.
use rdkafka::ClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

struct Counts {
    ok: AtomicU64,
    failed: AtomicU64,
}

struct Ctx(Arc<Counts>);
impl ClientContext for Ctx {}
impl ProducerContext for Ctx {
    type DeliveryOpaque = ();
    fn delivery(&self, r: &DeliveryResult<'_>, _: ()) {
        match r {
            Ok(_) => self.0.ok.fetch_add(1, Ordering::Relaxed),
            Err((e, _)) => {
                eprintln!("delivery failed: {e}");
                self.0.failed.fetch_add(1, Ordering::Relaxed)
            }
        };
    }
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    if a.len() != 8 {
        eprintln!("usage: native_floor BOOTSTRAP SOURCE DESTINATION CODEC COUNT BATCH_BYTES LINGER_MS");
        std::process::exit(2);
    }
    let (bootstrap, source, dest, codec) = (&a[1], &a[2], &a[3], &a[4]);
    let count: u64 = a[5].parse().expect("COUNT");
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", format!("native-floor-{dest}"))
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .create()
        .expect("consumer");
    let counts = Arc::new(Counts { ok: AtomicU64::new(0), failed: AtomicU64::new(0) });
    let producer: ThreadedProducer<Ctx> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("compression.type", codec.as_str())
        .set("linger.ms", &a[7])
        .set("batch.size", &a[6])
        .set("batch.num.messages", "10000")
        .set("enable.idempotence", "true")
        .set("queue.buffering.max.kbytes", "262144")
        .set("queue.buffering.max.messages", "10000000")
        .create_with_context(Ctx(counts.clone()))
        .expect("producer");
    consumer.subscribe(&[source.as_str()]).expect("subscribe");
    let mut read = 0u64;
    while read < count {
        let Some(m) = consumer.poll(Duration::from_millis(100)) else { continue };
        let m = m.expect("consume");
        let mut rec: BaseRecord<[u8], [u8], ()> = BaseRecord::to(dest).partition(m.partition());
        if let Some(k) = m.key() {
            rec = rec.key(k);
        }
        if let Some(v) = m.payload() {
            rec = rec.payload(v);
        }
        if let Some(ts) = m.timestamp().to_millis() {
            rec = rec.timestamp(ts);
        }
        if let Some(h) = m.headers() {
            rec = rec.headers(h.detach());
        }
        loop {
            match producer.send(rec) {
                Ok(()) => break,
                Err((_, back)) => {
                    rec = back; // the local queue is full: wait for deliveries
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        }
        read += 1;
    }
    producer.flush(Duration::from_secs(300)).expect("flush");
    let failed = counts.failed.load(Ordering::Relaxed);
    eprintln!("copied {} records, {failed} failed", counts.ok.load(Ordering::Relaxed));
    std::process::exit(if failed == 0 { 0 } else { 1 });
}
