//! transcoder's compiled hot path: Kafka v2 record batches (KIP-98, Kafka's `DefaultRecordBatch`),
//! framed from Python records and compressed, many batches at once on all cores.
//!
//! Records are read from Python objects while the GIL is held (framing is a copy per record); the
//! compression and the CRC, which is where the time goes, run with the GIL released, one batch per
//! task on rayon's pool. Every codec writes what librdkafka writes and every Kafka client reads:
//! zstd one frame; gzip one member (deflate by libdeflate); lz4 one LZ4 frame of
//! independent 64 KiB blocks without content size or checksum; snappy raw (as librdkafka; Java reads it).

use std::io::Write;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple};

pub use codec::{Codec, LIBRDKAFKA_MAX_LEVEL, ZSTD_MIN_LEVEL};

pub mod codec;
pub mod stored;
mod pool_cpu;
mod stored_py;

/// Bytes of a v2 batch outside its records section.
pub const BATCH_OVERHEAD: usize = 61;
const MAGIC: u8 = 2;

/// Compress a batch's records section for `codec` at `level` (already checked).
pub fn compress(codec: Codec, level: i32, data: &[u8]) -> std::io::Result<Vec<u8>> {
    match codec {
        Codec::None => Ok(data.to_vec()),
        Codec::Zstd => zstd::bulk::compress(data, level),
        Codec::Gzip => {
            let mut enc = libdeflater::Compressor::new(libdeflater::CompressionLvl::new(deflate_level(level)).map_err(|e| {
                std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("gzip level {level}: {e:?}"))
            })?);
            let mut out = vec![0; enc.gzip_compress_bound(data.len())];
            let n = enc.gzip_compress(data, &mut out)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::Other, format!("{e:?}")))?;
            out.truncate(n);
            Ok(out)
        }
        Codec::Lz4 => {
            let mut enc = lz4::EncoderBuilder::new()
                .block_size(lz4::BlockSize::Max64KB)
                .block_mode(lz4::BlockMode::Independent)
                .checksum(lz4::ContentChecksum::NoChecksum)
                .block_checksum(lz4::liblz4::BlockChecksum::NoBlockChecksum)
                .level(level as u32)
                .build(Vec::with_capacity(data.len() / 2 + 64))?;
            enc.write_all(data)?;
            let (out, result) = enc.finish();
            result.map(|_| out)
        }
        Codec::Snappy => snap::raw::Encoder::new()
            .compress_vec(data)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e)),
    }
}

/// libdeflate's level for Kafka's gzip level `level` (zlib's 0-9): one higher for 1-8; 0 (stored) and 9 as they are.
///
/// At the same level libdeflate compresses 0.5-2% less than zlib at levels 5-7 on log data; one level higher it
/// compresses at least as well as zlib at every level, in less CPU. At 9 it already does, and its 10 costs 3-6x
/// zlib's 9 (measured on 1 MiB batches of nginx, json-logs, metrics and entities:
/// bench/results/2026-11-24-gzip-levels.md).
pub fn deflate_level(level: i32) -> i32 {
    match level {
        ..=0 => 0,
        1..=8 => level + 1,
        _ => 9,
    }
}

pub(crate) fn put_varint(out: &mut Vec<u8>, n: i64) {
    let mut v = ((n << 1) ^ (n >> 63)) as u64;
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

pub(crate) fn varint_len(n: i64) -> usize {
    let mut v = ((n << 1) ^ (n >> 63)) as u64;
    let mut len = 1;
    while v >= 0x80 {
        v >>= 7;
        len += 1;
    }
    len
}

fn put_blob(out: &mut Vec<u8>, blob: Option<&[u8]>) {
    match blob {
        None => put_varint(out, -1),
        Some(b) => {
            put_varint(out, b.len() as i64);
            out.extend_from_slice(b);
        }
    }
}

fn blob_len(blob: Option<&[u8]>) -> usize {
    match blob {
        None => 1,
        Some(b) => varint_len(b.len() as i64) + b.len(),
    }
}

/// One record as framing sees it.
pub struct Record<'a> {
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub headers: Vec<(&'a [u8], Option<&'a [u8]>)>,
    pub timestamp: i64,
}

/// Append one v2 record (its length varint first) to `out`.
pub fn put_record(out: &mut Vec<u8>, offset_delta: i64, timestamp_delta: i64, r: &Record<'_>) {
    let mut body = 1 + varint_len(timestamp_delta) + varint_len(offset_delta) + blob_len(r.key) + blob_len(r.value);
    body += varint_len(r.headers.len() as i64);
    for (name, value) in &r.headers {
        body += blob_len(Some(name)) + blob_len(*value);
    }
    put_varint(out, body as i64);
    out.push(0); // record attributes: unused
    put_varint(out, timestamp_delta);
    put_varint(out, offset_delta);
    put_blob(out, r.key);
    put_blob(out, r.value);
    put_varint(out, r.headers.len() as i64);
    for (name, value) in &r.headers {
        put_blob(out, Some(name));
        put_blob(out, *value);
    }
}

/// A batch framed but not yet compressed: its records section and the header fields it needs.
pub struct Framed {
    pub section: Vec<u8>,
    pub count: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
}

/// Who wrote a batch: idempotent producers set id, epoch and base sequence (-1 otherwise); a transactional one's
/// batches carry the transactional attribute bit.
#[derive(Clone, Copy)]
pub struct Producer {
    pub id: i64,
    pub epoch: i16,
    pub base_sequence: i32,
    pub transactional: bool,
}

/// The v2 batch attribute bit of a batch written in a transaction.
pub(crate) const TRANSACTIONAL: i16 = 0x10;

/// The whole v2 batch: header, CRC-32C (Castagnoli) over attributes to the end, compressed records.
pub fn seal(framed: &Framed, codec: Codec, level: i32, base_offset: i64, producer: Producer) -> std::io::Result<Vec<u8>> {
    seal_parts(framed, &framed.section, codec, level, base_offset, producer)
}

/// `seal` with the records section given apart from the header fields (`framed.section` unused).
pub fn seal_parts(framed: &Framed, section: &[u8], codec: Codec, level: i32, base_offset: i64, producer: Producer)
                  -> std::io::Result<Vec<u8>> {
    let payload = compress(codec, level, section)?;
    let mut out = Vec::with_capacity(BATCH_OVERHEAD + payload.len());
    out.extend_from_slice(&base_offset.to_be_bytes());
    out.extend_from_slice(&((BATCH_OVERHEAD - 12 + payload.len()) as i32).to_be_bytes());
    out.extend_from_slice(&(-1i32).to_be_bytes()); // partitionLeaderEpoch: set by the broker
    out.push(MAGIC);
    out.extend_from_slice(&[0; 4]); // crc, below
    let attributes = codec.attribute() | if producer.transactional { TRANSACTIONAL } else { 0 };
    out.extend_from_slice(&attributes.to_be_bytes()); // CreateTime, not control
    out.extend_from_slice(&(framed.count - 1).to_be_bytes());
    out.extend_from_slice(&framed.base_timestamp.to_be_bytes());
    out.extend_from_slice(&framed.max_timestamp.to_be_bytes());
    out.extend_from_slice(&producer.id.to_be_bytes());
    out.extend_from_slice(&producer.epoch.to_be_bytes());
    out.extend_from_slice(&producer.base_sequence.to_be_bytes());
    out.extend_from_slice(&framed.count.to_be_bytes());
    out.extend_from_slice(&payload);
    let crc = crc32c::crc32c(&out[21..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    Ok(out)
}

// ------------------------------------------------------------------ Python objects -> records
fn opt_bytes<'a>(obj: &'a Bound<'_, PyAny>, what: &str) -> PyResult<Option<&'a [u8]>> {
    if obj.is_none() {
        return Ok(None);
    }
    match obj.cast::<PyBytes>() {
        Ok(b) => Ok(Some(b.as_bytes())),
        Err(_) => Err(PyTypeError::new_err(format!(
            "a record's {what} must be bytes or None, not {}", obj.get_type().name()?))),
    }
}

const RECORD_SHAPE: &str = "a record is a tuple (key, value, headers, timestamp_ms, ...)";
const HEADER_SHAPE: &str = "a header is a tuple (name: str, value: bytes | None)";

/// Append one record to `out`: `key`, `value` bytes or None, `headers` `(name, value)` pairs or None.
fn put_py_record(out: &mut Vec<u8>, offset_delta: i64, timestamp_delta: i64, timestamp: i64, k: &Bound<'_, PyAny>,
                 v: &Bound<'_, PyAny>, hs: &Bound<'_, PyAny>) -> PyResult<()> {
    let mut pairs = Vec::new();
    if !hs.is_none() {
        for h in hs.try_iter()? {
            let pair = h?.cast_into::<PyTuple>().map_err(|_| PyTypeError::new_err(HEADER_SHAPE))?;
            if pair.len() != 2 {
                return Err(PyTypeError::new_err(HEADER_SHAPE));
            }
            pairs.push((pair.get_item(0)?, pair.get_item(1)?));
        }
    }
    let mut headers = Vec::with_capacity(pairs.len());
    for (name, value) in &pairs {
        let name = name.cast::<PyString>().map_err(|_| PyTypeError::new_err(HEADER_SHAPE))?.to_str()?;
        headers.push((name.as_bytes(), opt_bytes(value, "header value")?));
    }
    let record = Record { key: opt_bytes(k, "key")?, value: opt_bytes(v, "value")?, headers, timestamp };
    put_record(out, offset_delta, timestamp_delta, &record);
    Ok(())
}

/// Frame a list of `(key, value, headers, timestamp_ms, ...)` tuples (items after the fourth ignored), reading each straight into the records section.
fn frame_list(records: &Bound<'_, PyList>) -> PyResult<Framed> {
    if records.is_empty() {
        return Err(PyValueError::new_err("a record batch holds at least one record"));
    }
    let mut section = Vec::new();
    let (mut base_ts, mut max_ts) = (0i64, i64::MIN);
    for (i, item) in records.iter().enumerate() {
        let t = item.cast::<PyTuple>().map_err(|_| PyTypeError::new_err(RECORD_SHAPE))?;
        if t.len() < 4 {
            return Err(PyTypeError::new_err(RECORD_SHAPE));
        }
        let timestamp: i64 = t.get_item(3)?.extract()?;
        if i == 0 {
            base_ts = timestamp;
        }
        max_ts = max_ts.max(timestamp);
        put_py_record(&mut section, i as i64, timestamp - base_ts, timestamp, &t.get_item(0)?, &t.get_item(1)?,
                      &t.get_item(2)?)?;
    }
    Ok(Framed { section, count: records.len() as i32, base_timestamp: base_ts, max_timestamp: max_ts })
}

pub(crate) fn codec_level(codec: &str, level: Option<i32>) -> PyResult<(Codec, i32)> {
    let c = Codec::parse(codec).map_err(PyValueError::new_err)?;
    let l = c.level(level).map_err(PyValueError::new_err)?;
    Ok((c, l))
}

pub(crate) fn io_err(e: std::io::Error) -> PyErr {
    PyValueError::new_err(format!("compression failed: {e}"))
}

// ------------------------------------------------------------------ the Python module
/// One v2 record batch of `(key, value, headers, timestamp_ms)` records, CreateTime; `transactional`: written in
/// a transaction (the attribute bit set, the CRC after it).
#[pyfunction]
#[pyo3(signature = (records, *, codec="none", level=None, base_offset=0, producer_id=-1, producer_epoch=-1, base_sequence=-1,
                    transactional=false))]
fn encode_batch<'py>(py: Python<'py>, records: &Bound<'py, PyList>, codec: &str, level: Option<i32>, base_offset: i64,
                     producer_id: i64, producer_epoch: i16, base_sequence: i32, transactional: bool)
                     -> PyResult<Bound<'py, PyBytes>> {
    let (c, l) = codec_level(codec, level)?;
    let framed = frame_list(records)?;
    let producer = Producer { id: producer_id, epoch: producer_epoch, base_sequence, transactional };
    let out = py.detach(|| seal(&framed, c, l, base_offset, producer)).map_err(io_err)?;
    Ok(PyBytes::new(py, &out))
}

/// Many batches at once, compressed in parallel: `jobs` are `(records, producer_id, producer_epoch, base_sequence)`,
/// all with one codec and level (and `transactional`, as `encode_batch`). Returns the batches in the order of `jobs`.
#[pyfunction]
#[pyo3(signature = (jobs, *, codec="none", level=None, transactional=false))]
fn encode_batches<'py>(py: Python<'py>, jobs: &Bound<'py, PyList>, codec: &str, level: Option<i32>, transactional: bool)
                       -> PyResult<Vec<Bound<'py, PyBytes>>> {
    let (c, l) = codec_level(codec, level)?;
    let mut framed = Vec::with_capacity(jobs.len());
    for job in jobs.iter() {
        let t = job.cast::<PyTuple>().map_err(|_| PyTypeError::new_err("a job is a tuple (records, producer_id, producer_epoch, base_sequence)"))?;
        if t.len() != 4 {
            return Err(PyTypeError::new_err("a job is a tuple (records, producer_id, producer_epoch, base_sequence)"));
        }
        let records = t.get_item(0)?.cast_into::<PyList>().map_err(|_| PyTypeError::new_err("a job's records must be a list"))?;
        let producer = Producer { id: t.get_borrowed_item(1)?.extract()?, epoch: t.get_borrowed_item(2)?.extract()?,
                                  base_sequence: t.get_borrowed_item(3)?.extract()?, transactional };
        framed.push((frame_list(&records)?, producer));
    }
    let sealed = pool_cpu::par_map(py, &framed, |(f, p)| seal(f, c, l, 0, *p));
    sealed.into_iter().map(|r| r.map(|b| PyBytes::new(py, &b)).map_err(io_err)).collect()
}

/// One v2 record (its length varint included), as it sits in a batch's records section.
#[pyfunction]
fn encode_record<'py>(py: Python<'py>, offset_delta: i64, timestamp_delta: i64, key: &Bound<'py, PyAny>,
                      value: &Bound<'py, PyAny>, headers: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
    let mut out = Vec::new();
    put_py_record(&mut out, offset_delta, timestamp_delta, 0, key, value, headers)?;
    Ok(PyBytes::new(py, &out))
}

/// A records section compressed for `codec` at `level` as this module seals batches (the GIL released).
#[pyfunction]
#[pyo3(name = "compress", signature = (codec, data, level=None))]
fn compress_section<'py>(py: Python<'py>, codec: &str, data: &[u8], level: Option<i32>) -> PyResult<Bound<'py, PyBytes>> {
    let (c, l) = codec_level(codec, level)?;
    let out = py.detach(|| compress(c, l, data)).map_err(io_err)?;
    Ok(PyBytes::new(py, &out))
}

/// The records section of a list of record tuples, uncompressed.
#[pyfunction]
fn records_section<'py>(py: Python<'py>, records: &Bound<'py, PyList>) -> PyResult<Bound<'py, PyBytes>> {
    Ok(PyBytes::new(py, &frame_list(records)?.section))
}

#[pymodule]
fn transcoder_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    pool_cpu::name_pool();
    m.add_function(wrap_pyfunction!(pool_cpu::pool_cpu_by_thread, m)?)?;
    m.add("POOL_THREAD_PREFIX", pool_cpu::POOL_THREAD_PREFIX)?;
    m.add_function(wrap_pyfunction!(encode_batch, m)?)?;
    m.add_function(wrap_pyfunction!(encode_batches, m)?)?;
    m.add_function(wrap_pyfunction!(records_section, m)?)?;
    m.add_function(wrap_pyfunction!(encode_record, m)?)?;
    m.add_function(wrap_pyfunction!(compress_section, m)?)?;
    m.add("BATCH_OVERHEAD", BATCH_OVERHEAD)?;
    m.add_function(wrap_pyfunction!(codec::codec_table, m)?)?;
    m.add_function(wrap_pyfunction!(codec::decompress_section, m)?)?;
    m.add("LIBRDKAFKA_MAX_LEVEL", LIBRDKAFKA_MAX_LEVEL)?;
    stored_py::register(m)?;
    Ok(())
}
