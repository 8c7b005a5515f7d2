//! Record sets as a broker stores and fetches them, read without a record object per record, and
//! re-batched into new v2 batches for another codec.
//!
//! `decode` walks a Fetch response's records (v2 batches, or v0/v1 message sets of legacy sources),
//! checks each batch's CRC, leaves out control batches and the batches of aborted transactions (as
//! a read_committed Java consumer does), decompresses, and indexes each record: its source offset,
//! timestamp and the bytes from its key on (key, value, headers), which are copied as they are.
//! `Rebatcher` appends those bytes to new records sections with new offset and timestamp deltas,
//! closing a section by size (librdkafka's batch.size: uncompressed bytes) and record count.

use std::collections::HashSet;
use std::io::Read;

use crate::{put_varint, varint_len, Codec, BATCH_OVERHEAD};

/// One record of a decoded record set.
#[derive(Clone, Copy, Debug)]
pub struct Rec {
    buf: u32,
    start: u32,
    end: u32,
    pub offset: i64,
    /// -1: the source stored none (message format v0): the copy's time is given when re-batched
    pub timestamp: i64,
    /// key + value + header names and values, in bytes (the size transcoder counts everywhere)
    pub size: u32,
}

/// The records of one fetched record set, in offset order.
#[derive(Default)]
pub struct Decoded {
    bufs: Vec<Vec<u8>>,
    pub recs: Vec<Rec>,
    /// The offset after the last whole batch read (control and aborted batches included): where the next fetch
    /// starts. Equal to the fetch offset when the set held no whole batch.
    pub next_offset: i64,
    /// Whole batches read, and of them skipped: control batches, batches of aborted transactions.
    pub batches: u32,
    pub skipped_batches: u32,
}

impl Decoded {
    /// The record's bytes from its key on: key, value, headers, as stored.
    pub fn tail(&self, r: &Rec) -> &[u8] {
        &self.bufs[r.buf as usize][r.start as usize..r.end as usize]
    }
}

fn err<T>(offset: i64, what: impl std::fmt::Display) -> Result<T, String> {
    Err(format!("offset {offset}: {what}"))
}

fn be_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}
fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(b[at..at + 4].try_into().unwrap())
}
fn be_i64(b: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(b[at..at + 8].try_into().unwrap())
}

/// A zigzag varint at `*pos`, advancing it.
pub(crate) fn varint(b: &[u8], pos: &mut usize) -> Option<i64> {
    let mut v: u64 = 0;
    let mut shift = 0;
    loop {
        let byte = *b.get(*pos)?;
        *pos += 1;
        v |= ((byte & 0x7f) as u64) << shift;
        if byte & 0x80 == 0 {
            return Some(((v >> 1) as i64) ^ -((v & 1) as i64));
        }
        shift += 7;
        if shift > 63 {
            return None;
        }
    }
}

/// Skip a varint-length-prefixed blob (-1: null); its length (0 for null).
fn skip_blob(b: &[u8], pos: &mut usize) -> Option<usize> {
    let n = varint(b, pos)?;
    if n < 0 {
        return Some(0);
    }
    let n = n as usize;
    if *pos + n > b.len() {
        return None;
    }
    *pos += n;
    Some(n)
}

/// Walk a record's key, value and headers from `*pos` (advancing it); their bytes added up.
fn walk_tail(b: &[u8], pos: &mut usize) -> Option<usize> {
    let mut size = skip_blob(b, pos)? + skip_blob(b, pos)?;
    let headers = varint(b, pos)?;
    for _ in 0..headers.max(0) {
        size += skip_blob(b, pos)? + skip_blob(b, pos)?;
    }
    Some(size)
}

/// Decompress a records section (or a legacy wrapper's value) stored with `codec`.
pub fn decompress(codec: i16, data: &[u8]) -> Result<Vec<u8>, String> {
    let Some(c) = Codec::from_attribute(codec) else {
        return Err(format!("unknown compression codec id {codec}"));
    };
    match c {
        Codec::None => Ok(data.to_vec()),
        Codec::Gzip => {
            // One gzip member, as every Kafka client writes; its trailer holds the size.
            if data.len() < 18 {
                return Err("gzip data too short".into());
            }
            let size = u32::from_le_bytes(data[data.len() - 4..].try_into().unwrap()) as usize;
            let mut out = vec![0; size.max(1)];
            let mut d = libdeflater::Decompressor::new();
            let n = d.gzip_decompress(data, &mut out).map_err(|e| format!("gzip: {e:?}"))?;
            out.truncate(n);
            Ok(out)
        }
        Codec::Snappy => unsnappy(data),
        Codec::Lz4 => {
            let mut out = Vec::with_capacity(data.len() * 4);
            lz4::Decoder::new(data).and_then(|mut d| d.read_to_end(&mut out)).map_err(|e| format!("lz4: {e}"))?;
            Ok(out)
        }
        Codec::Zstd => zstd::stream::decode_all(data).map_err(|e| format!("zstd: {e}")),
    }
}

const XERIAL: &[u8] = b"\x82SNAPPY\x00";

/// Snappy as Kafka clients write it: raw (librdkafka) or in xerial's blocks (the Java client).
fn unsnappy(data: &[u8]) -> Result<Vec<u8>, String> {
    if !data.starts_with(XERIAL) {
        return snap::raw::Decoder::new().decompress_vec(data).map_err(|e| format!("snappy: {e}"));
    }
    let mut out = Vec::new();
    let mut pos = 16; // magic, version, compatible version
    let mut dec = snap::raw::Decoder::new();
    while pos + 4 <= data.len() {
        let n = be_i32(data, pos) as usize;
        pos += 4;
        if pos + n > data.len() {
            return Err("snappy: a xerial block runs past the data".into());
        }
        out.extend(dec.decompress_vec(&data[pos..pos + n]).map_err(|e| format!("snappy: {e}"))?);
        pos += n;
    }
    Ok(out)
}

/// Aborted transactions as a Fetch response lists them: (producer id, first offset), and which producers'
/// transactional batches are being skipped (from their first offset to their ABORT marker).
struct Aborts {
    pending: Vec<(i64, i64)>,
    active: HashSet<i64>,
}

impl Aborts {
    fn new(aborted: &[(i64, i64)]) -> Aborts {
        let mut pending = aborted.to_vec();
        pending.sort_by_key(|&(_, first)| std::cmp::Reverse(first));
        Aborts { pending, active: HashSet::new() }
    }

    /// Whether a transactional batch of `producer` ending at `last_offset` was aborted.
    fn aborted(&mut self, producer: i64, last_offset: i64) -> bool {
        while let Some(&(pid, first)) = self.pending.last() {
            if first > last_offset {
                break;
            }
            self.active.insert(pid);
            self.pending.pop();
        }
        self.active.contains(&producer)
    }
}

/// Decode a fetched record set from `from_offset` on (a Fetch may start inside a batch: its records before
/// `from_offset` are left out). A partial batch at the end (the broker cut the response at max bytes) is left
/// for the next fetch.
pub fn decode(data: &[u8], from_offset: i64, aborted: &[(i64, i64)]) -> Result<Decoded, String> {
    let mut out = Decoded { next_offset: from_offset, ..Default::default() };
    let mut aborts = Aborts::new(aborted);
    let mut pos = 0;
    while pos + 17 <= data.len() {
        let base = be_i64(data, pos);
        let length = be_i32(data, pos + 8);
        if length < 0 {
            return err(base, format!("a batch of negative length {length}"));
        }
        let end = pos + 12 + length as usize;
        if end > data.len() {
            break; // cut by the fetch's size limit
        }
        let batch = &data[pos..end];
        match batch[16] {
            2 => decode_v2(batch, from_offset, &mut aborts, &mut out)?,
            0 | 1 => {
                decode_legacy(batch, from_offset, &mut out)?;
                out.batches += 1;
                out.next_offset = out.next_offset.max(base + 1);
            }
            m => return err(base, format!("unknown record format (magic {m})")),
        }
        pos = end;
    }
    Ok(out)
}

fn decode_v2(b: &[u8], from_offset: i64, aborts: &mut Aborts, out: &mut Decoded) -> Result<(), String> {
    let base = be_i64(b, 0);
    if b.len() < BATCH_OVERHEAD {
        return err(base, "a v2 batch shorter than its header");
    }
    let crc = be_i32(b, 17) as u32;
    if crc32c::crc32c(&b[21..]) != crc {
        return err(base, "the batch's CRC does not match its bytes (corrupt)");
    }
    let attributes = be_i16(b, 21);
    let last = base + be_i32(b, 23) as i64;
    let first_ts = be_i64(b, 27);
    let max_ts = be_i64(b, 35);
    let producer = be_i64(b, 43);
    let count = be_i32(b, 57);
    out.batches += 1;
    out.next_offset = out.next_offset.max(last + 1);
    let transactional = attributes & 0x10 != 0;
    if attributes & 0x20 != 0 {
        // A control batch: a transaction's marker. ABORT (type 0) ends the skipping of its producer's batches.
        out.skipped_batches += 1;
        if transactional && b.len() >= BATCH_OVERHEAD + 8 {
            let mut p = BATCH_OVERHEAD;
            let _len = varint(b, &mut p);
            p += 1; // attributes
            let _ = varint(b, &mut p);
            let _ = varint(b, &mut p);
            let key_len = varint(b, &mut p).unwrap_or(-1);
            if key_len >= 4 && p + 4 <= b.len() && be_i16(b, p + 2) == 0 {
                aborts.active.remove(&producer);
            }
        }
        return Ok(());
    }
    if transactional && aborts.aborted(producer, last) {
        out.skipped_batches += 1;
        return Ok(());
    }
    if last < from_offset {
        return Ok(());
    }
    let log_append = attributes & 0x08 != 0;
    let section = decompress(attributes & 0x07, &b[BATCH_OVERHEAD..]).map_err(|e| format!("offset {base}: {e}"))?;
    let buf = out.bufs.len() as u32;
    let mut p = 0;
    for _ in 0..count {
        let bad = || format!("offset {base}: a record runs past its batch (corrupt)");
        let len = varint(&section, &mut p).ok_or_else(bad)?;
        let rec_end = p + len as usize;
        if len < 0 || rec_end > section.len() {
            return Err(bad());
        }
        p += 1; // record attributes
        let ts_delta = varint(&section, &mut p).ok_or_else(bad)?;
        let off_delta = varint(&section, &mut p).ok_or_else(bad)?;
        let start = p;
        let size = walk_tail(&section, &mut p).ok_or_else(bad)?;
        if p != rec_end {
            return Err(bad());
        }
        let offset = base + off_delta;
        if offset >= from_offset {
            out.recs.push(Rec { buf, start: start as u32, end: rec_end as u32, offset,
                                timestamp: if log_append { max_ts } else { first_ts + ts_delta }, size: size as u32 });
        }
        p = rec_end;
    }
    out.bufs.push(section);
    Ok(())
}

/// A v0/v1 message set entry (a shallow message, possibly a compressed wrapper of inner messages): its records,
/// as v2 record tails (key, value, no headers) in a buffer of their own.
fn decode_legacy(b: &[u8], from_offset: i64, out: &mut Decoded) -> Result<(), String> {
    let mut tails = Vec::new();
    let mut recs = Vec::new();
    legacy_messages(b, from_offset, None, &mut tails, &mut recs)?;
    let buf = out.bufs.len() as u32;
    out.recs.extend(recs.into_iter().map(|mut r| {
        r.buf = buf;
        r
    }));
    out.bufs.push(tails);
    Ok(())
}

/// `wrapper`: the outer message's (offset, magic, timestamp, log append time) for inner messages.
fn legacy_messages(data: &[u8], from_offset: i64, wrapper: Option<(i64, u8, i64, bool)>, tails: &mut Vec<u8>,
                   recs: &mut Vec<Rec>) -> Result<(), String> {
    let mut pos = 0;
    let mut inner: Vec<(i64, i64, usize, usize, u32)> = Vec::new(); // offset, timestamp, tail start, end, size
    while pos + 12 <= data.len() {
        let offset = be_i64(data, pos);
        let size = be_i32(data, pos + 8);
        let end = pos + 12 + size.max(0) as usize;
        if size < 14 || end > data.len() {
            if wrapper.is_some() {
                return err(offset, "a compressed message set runs past its wrapper (corrupt)");
            }
            break;
        }
        let m = &data[pos + 12..end];
        let crc = be_i32(m, 0) as u32;
        if libdeflater::crc32(&m[4..]) != crc {
            return err(offset, "the message's CRC does not match its bytes (corrupt)");
        }
        let magic = m[4];
        let attributes = m[5];
        let mut p = 6;
        let timestamp = if magic >= 1 {
            p += 8;
            be_i64(m, 6)
        } else {
            -1
        };
        let bad = || format!("offset {offset}: a message runs past its end (corrupt)");
        let key = legacy_blob(m, &mut p).ok_or_else(bad)?;
        let value = legacy_blob(m, &mut p).ok_or_else(bad)?;
        let codec = (attributes & 0x07) as i16;
        if codec != 0 {
            if wrapper.is_some() {
                return err(offset, "a compressed message inside a compressed message");
            }
            let v = value.ok_or_else(|| format!("offset {offset}: a compressed message without a value"))?;
            let set = decompress(codec, v).map_err(|e| format!("offset {offset}: {e}"))?;
            legacy_messages(&set, from_offset, Some((offset, magic, timestamp, attributes & 0x08 != 0)), tails, recs)?;
        } else {
            let start = tails.len();
            let mut sz = 0;
            for blob in [key, value] {
                match blob {
                    None => put_varint(tails, -1),
                    Some(x) => {
                        put_varint(tails, x.len() as i64);
                        tails.extend_from_slice(x);
                        sz += x.len();
                    }
                }
            }
            put_varint(tails, 0); // no headers
            inner.push((offset, timestamp, start, tails.len(), sz as u32));
        }
        pos = end;
    }
    // Inner offsets: absolute in v0; relative in v1, the wrapper carrying the last one's.
    let shift = match wrapper {
        Some((w_off, 1, _, _)) => w_off - inner.last().map_or(0, |x| x.0),
        _ => 0,
    };
    for (offset, ts, start, end, size) in inner {
        let timestamp = match wrapper {
            Some((_, 1, w_ts, true)) => w_ts,
            _ => ts,
        };
        let offset = offset + shift;
        if offset >= from_offset {
            recs.push(Rec { buf: 0, start: start as u32, end: end as u32, offset, timestamp, size });
        }
    }
    Ok(())
}

fn legacy_blob<'a>(m: &'a [u8], p: &mut usize) -> Option<Option<&'a [u8]>> {
    if *p + 4 > m.len() {
        return None;
    }
    let n = be_i32(m, *p);
    *p += 4;
    if n < 0 {
        return Some(None);
    }
    let n = n as usize;
    if *p + n > m.len() {
        return None;
    }
    let out = &m[*p..*p + n];
    *p += n;
    Some(Some(out))
}

/// A records section being filled (or closed): v2 records with their new deltas, and where they came from.
#[derive(Clone, Debug, Default)]
pub struct Section {
    pub data: Vec<u8>,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    /// the source offset of each record, in order
    pub offsets: Vec<i64>,
    /// key + value + header bytes of its records
    pub size: u64,
}

impl Section {
    pub fn count(&self) -> usize {
        self.offsets.len()
    }

    /// The bytes a record of timestamp `ts` and bytes `tail` (from its key on) takes appended here.
    fn appended_len(&self, ts: i64, tail: &[u8]) -> usize {
        let (ts_delta, off_delta) = self.deltas(ts);
        let body = 1 + varint_len(ts_delta) + varint_len(off_delta) + tail.len();
        varint_len(body as i64) + body
    }

    fn deltas(&self, ts: i64) -> (i64, i64) {
        if self.offsets.is_empty() { (0, 0) } else { (ts - self.base_timestamp, self.offsets.len() as i64) }
    }

    /// Append a record: its new offset and timestamp deltas, then its bytes from its key on as they are.
    fn push(&mut self, ts: i64, offset: i64, tail: &[u8], size: u64) {
        let (ts_delta, off_delta) = self.deltas(ts);
        if self.offsets.is_empty() {
            self.base_timestamp = ts;
            self.max_timestamp = ts;
        }
        self.max_timestamp = self.max_timestamp.max(ts);
        let body = 1 + varint_len(ts_delta) + varint_len(off_delta) + tail.len();
        self.data.reserve(varint_len(body as i64) + body);
        put_varint(&mut self.data, body as i64);
        self.data.push(0); // record attributes: unused
        put_varint(&mut self.data, ts_delta);
        put_varint(&mut self.data, off_delta);
        self.data.extend_from_slice(tail);
        self.offsets.push(offset);
        self.size += size;
    }

    /// Each record's (timestamp, bytes from its key on), walking the section's records.
    pub fn records(&self) -> Vec<(i64, &[u8])> {
        let mut out = Vec::with_capacity(self.count());
        let mut p = 0;
        let d = &self.data;
        while p < d.len() {
            let len = varint(d, &mut p).expect("a section's own records") as usize;
            let end = p + len;
            p += 1; // attributes
            let ts_delta = varint(d, &mut p).expect("a section's own records");
            let _ = varint(d, &mut p);
            out.push((self.base_timestamp + ts_delta, &d[p..end]));
            p = end;
        }
        out
    }

    /// The section in two halves by record count (a batch the broker refused as too large, sent again as two).
    pub fn split(&self) -> (Section, Section) {
        let half = self.count() / 2;
        let recs = self.records();
        let [mut a, mut b] = [Section::default(), Section::default()];
        for (i, (ts, tail)) in recs.iter().enumerate() {
            let size = walk_tail(tail, &mut 0).expect("a section's own records") as u64;
            (if i < half { &mut a } else { &mut b }).push(*ts, self.offsets[i], tail, size);
        }
        (a, b)
    }
}

/// Records into sections of at most `max_bytes` (the batch, header included, uncompressed; a record larger than
/// that alone) and `max_records`.
pub struct Rebatcher {
    pub max_bytes: usize,
    pub max_records: usize,
    pub open: Section,
    pub closed: Vec<Section>,
}

impl Rebatcher {
    pub fn new(max_bytes: usize, max_records: usize) -> Rebatcher {
        Rebatcher { max_bytes, max_records: max_records.max(1), open: Section::default(), closed: Vec::new() }
    }

    /// Append records `recs` of `d`; records without a timestamp (v0) get `now_ms`.
    pub fn add(&mut self, d: &Decoded, recs: &[Rec], now_ms: i64) {
        for r in recs {
            let tail = d.tail(r);
            let ts = if r.timestamp < 0 { now_ms } else { r.timestamp };
            let s = &self.open;
            let n = s.count();
            if n > 0 && (n >= self.max_records || BATCH_OVERHEAD + s.data.len() + s.appended_len(ts, tail) > self.max_bytes) {
                self.closed.push(std::mem::take(&mut self.open));
            }
            self.open.push(ts, r.offset, tail, r.size as u64);
        }
        if self.open.offsets.len() >= self.max_records {
            self.closed.push(std::mem::take(&mut self.open));
        }
    }

    /// The closed sections, and the open one too with `flush` (linger over, or a flush).
    pub fn take(&mut self, flush: bool) -> Vec<Section> {
        if flush && !self.open.offsets.is_empty() {
            self.closed.push(std::mem::take(&mut self.open));
        }
        std::mem::take(&mut self.closed)
    }
}

/// Seal a section as a v2 batch for `codec` (see `crate::seal`).
pub fn seal_section(s: &Section, codec: Codec, level: i32, producer: crate::Producer) -> std::io::Result<Vec<u8>> {
    let framed = crate::Framed { section: Vec::new(), count: s.count() as i32, base_timestamp: s.base_timestamp,
                                 max_timestamp: s.max_timestamp };
    crate::seal_parts(&framed, &s.data, codec, level, 0, producer)
}

/// The same batch under another producer id, epoch and base sequence: the header patched, the CRC again
/// (it covers them); the compressed records are kept. `transactional`: the attribute bit set (true) or cleared
/// (false); None keeps it as it is.
pub fn restamp(batch: &[u8], producer: crate::Producer, transactional: Option<bool>) -> Result<Vec<u8>, String> {
    if batch.len() < BATCH_OVERHEAD || batch[16] != 2 {
        return Err("not a v2 record batch".into());
    }
    let mut out = batch.to_vec();
    if let Some(t) = transactional {
        let attributes = i16::from_be_bytes([out[21], out[22]]);
        let attributes = if t { attributes | crate::TRANSACTIONAL } else { attributes & !crate::TRANSACTIONAL };
        out[21..23].copy_from_slice(&attributes.to_be_bytes());
    }
    out[43..51].copy_from_slice(&producer.id.to_be_bytes());
    out[51..53].copy_from_slice(&producer.epoch.to_be_bytes());
    out[53..57].copy_from_slice(&producer.base_sequence.to_be_bytes());
    let crc = crc32c::crc32c(&out[21..]); // over the attributes too: after the bit
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    Ok(out)
}
