//! Python's view of `stored`: fetched record sets decoded, re-batched and sealed, with the GIL released
//! for the work on bytes.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};

use crate::stored::{self, Decoded};
use crate::{codec_level, io_err, Producer};

/// The records of one fetched record set (`decode_stored`).
#[pyclass(frozen, module = "transcoder_native")]
pub struct StoredRecords {
    inner: Decoded,
}

/// A varint at `*pos` of bytes this module wrote or checked itself (advancing it).
fn read_varint(b: &[u8], pos: &mut usize) -> i64 {
    stored::varint(b, pos).expect("a record already checked")
}

fn blob(py: Python<'_>, b: &[u8], pos: &mut usize) -> PyResult<Py<PyAny>> {
    let n = read_varint(b, pos);
    if n < 0 {
        return Ok(py.None());
    }
    let out = PyBytes::new(py, &b[*pos..*pos + n as usize]);
    *pos += n as usize;
    Ok(out.into_any().unbind())
}

#[pymethods]
impl StoredRecords {
    fn __len__(&self) -> usize {
        self.inner.recs.len()
    }

    /// Where the next fetch of this partition starts (after the last whole batch, skipped ones included).
    #[getter]
    fn next_offset(&self) -> i64 {
        self.inner.next_offset
    }

    /// Whole batches read, and of them left out (control batches, aborted transactions).
    #[getter]
    fn batches(&self) -> (u32, u32) {
        (self.inner.batches, self.inner.skipped_batches)
    }

    /// key + value + header bytes of all records.
    #[getter]
    fn size(&self) -> u64 {
        self.inner.recs.iter().map(|r| r.size as u64).sum()
    }

    #[getter]
    fn offsets(&self) -> Vec<i64> {
        self.inner.recs.iter().map(|r| r.offset).collect()
    }

    /// The first and last record's offsets (-1 without records).
    #[getter]
    fn first_offset(&self) -> i64 {
        self.inner.recs.first().map_or(-1, |r| r.offset)
    }

    #[getter]
    fn last_offset(&self) -> i64 {
        self.inner.recs.last().map_or(-1, |r| r.offset)
    }

    /// Where a run from record `start` ends (exclusive) so that its key + value + header bytes stay within
    /// `max_bytes`: at least one record while any is left (the room a lane has for records in flight).
    fn fit(&self, start: usize, max_bytes: u64) -> usize {
        let recs = &self.inner.recs;
        if start >= recs.len() {
            return recs.len();
        }
        let mut total = recs[start].size as u64;
        let mut stop = start + 1;
        while stop < recs.len() && total + recs[stop].size as u64 <= max_bytes {
            total += recs[stop].size as u64;
            stop += 1;
        }
        stop
    }

    /// Records `start..stop`: (first offset, last offset, key + value + header bytes); ValueError for an
    /// empty or out-of-range run.
    fn span(&self, start: usize, stop: usize) -> PyResult<(i64, i64, u64)> {
        let recs = &self.inner.recs;
        if start >= stop || stop > recs.len() {
            return Err(PyValueError::new_err(format!("no records {start}..{stop} of {}", recs.len())));
        }
        let run = &recs[start..stop];
        Ok((run[0].offset, run[run.len() - 1].offset, run.iter().map(|r| r.size as u64).sum()))
    }

    /// Record `i` as `(offset, timestamp_ms, key, value, headers)` (timestamp -1: none stored, message format v0;
    /// headers a list of `(name, value)`): for the records a caller needs one by one (samples, errors).
    fn record<'py>(&self, py: Python<'py>, i: usize) -> PyResult<Bound<'py, PyTuple>> {
        let r = self.inner.recs.get(i).ok_or_else(|| PyValueError::new_err(format!("no record {i}")))?;
        record_tuple(py, r.offset, r.timestamp, self.inner.tail(r))
    }
}

/// `(offset, timestamp, key, value, headers)` of a record's bytes from its key on.
fn record_tuple<'py>(py: Python<'py>, offset: i64, timestamp: i64, tail: &[u8]) -> PyResult<Bound<'py, PyTuple>> {
    let mut pos = 0;
    let key = blob(py, tail, &mut pos)?;
    let value = blob(py, tail, &mut pos)?;
    let n = read_varint(tail, &mut pos);
    let headers = PyList::empty(py);
    for _ in 0..n.max(0) {
        let len = read_varint(tail, &mut pos) as usize;
        let name = String::from_utf8_lossy(&tail[pos..pos + len]).into_owned();
        pos += len;
        let value = blob(py, tail, &mut pos)?;
        headers.append((name, value))?;
    }
    PyTuple::new(py, [offset.into_pyobject(py)?.into_any(), timestamp.into_pyobject(py)?.into_any(),
                      key.into_bound(py), value.into_bound(py), headers.into_any()])
}

/// Decode a fetched record set from `from_offset` on; `aborted`: the Fetch response's aborted transactions as
/// `(producer_id, first_offset)`. ValueError naming the offset for a corrupt or unreadable batch.
#[pyfunction]
#[pyo3(signature = (data, from_offset, aborted=Vec::new()))]
fn decode_stored(py: Python<'_>, data: &Bound<'_, PyBytes>, from_offset: i64, aborted: Vec<(i64, i64)>)
                 -> PyResult<StoredRecords> {
    let bytes = data.as_bytes();
    let inner = py.detach(|| stored::decode(bytes, from_offset, &aborted)).map_err(PyValueError::new_err)?;
    Ok(StoredRecords { inner })
}

/// A closed records section: its records' source offsets, sizes and timestamps; sealed by `seal_sections`.
#[pyclass(frozen, module = "transcoder_native")]
pub struct Section {
    inner: stored::Section,
}

#[pymethods]
impl Section {
    fn __len__(&self) -> usize {
        self.inner.count()
    }

    #[getter]
    fn first_offset(&self) -> i64 {
        self.inner.offsets.first().copied().unwrap_or(-1)
    }

    #[getter]
    fn last_offset(&self) -> i64 {
        self.inner.offsets.last().copied().unwrap_or(-1)
    }

    #[getter]
    fn offsets(&self) -> Vec<i64> {
        self.inner.offsets.clone()
    }

    /// key + value + header bytes of its records.
    #[getter]
    fn size(&self) -> u64 {
        self.inner.size
    }

    /// The uncompressed batch's bytes (header included).
    #[getter]
    fn uncompressed_bytes(&self) -> usize {
        crate::BATCH_OVERHEAD + self.inner.data.len()
    }

    #[getter]
    fn max_timestamp(&self) -> i64 {
        self.inner.max_timestamp
    }

    /// Record `i` as `(offset, timestamp_ms, key, value, headers)` (source offset; the timestamp as written).
    fn record<'py>(&self, py: Python<'py>, i: usize) -> PyResult<Bound<'py, PyTuple>> {
        let recs = self.inner.records();
        let (ts, tail) = recs.get(i).ok_or_else(|| PyValueError::new_err(format!("no record {i}")))?;
        record_tuple(py, self.inner.offsets[i], *ts, tail)
    }

    /// The section in two halves (by record count): a batch refused as too large goes again as two.
    fn split(&self) -> PyResult<(Section, Section)> {
        if self.inner.count() < 2 {
            return Err(PyValueError::new_err("a section of one record cannot be split"));
        }
        let (a, b) = self.inner.split();
        Ok((Section { inner: a }, Section { inner: b }))
    }
}

/// Records re-batched for one destination partition: by `max_bytes` (uncompressed, as librdkafka's batch.size)
/// and `max_records`.
#[pyclass(module = "transcoder_native")]
pub struct Rebatcher {
    inner: stored::Rebatcher,
}

#[pymethods]
impl Rebatcher {
    #[new]
    fn new(max_bytes: usize, max_records: usize) -> Self {
        Rebatcher { inner: stored::Rebatcher::new(max_bytes, max_records) }
    }

    /// Append records `start..stop` of `records` (v0 records, with no timestamp, get `now_ms`).
    #[pyo3(signature = (records, now_ms, start=0, stop=None))]
    fn add(&mut self, py: Python<'_>, records: &Bound<'_, StoredRecords>, now_ms: i64, start: usize,
           stop: Option<usize>) {
        let d = &records.get().inner;
        let stop = stop.unwrap_or(d.recs.len()).min(d.recs.len());
        let recs = &d.recs[start.min(stop)..stop];
        let inner = &mut self.inner;
        py.detach(|| inner.add(d, recs, now_ms));
    }

    /// The closed sections, and the open one with `flush`.
    #[pyo3(signature = (flush=false))]
    fn take(&mut self, flush: bool) -> Vec<Section> {
        self.inner.take(flush).into_iter().map(|inner| Section { inner }).collect()
    }

    /// Records held (closed and open sections).
    #[getter]
    fn records(&self) -> usize {
        self.inner.open.count() + self.inner.closed.iter().map(|s| s.count()).sum::<usize>()
    }

    /// Whether any section is closed (ready to seal).
    #[getter]
    fn ready(&self) -> bool {
        !self.inner.closed.is_empty()
    }
}

/// Seal sections as v2 batches, compressed in parallel with the GIL released; `stamps[i]` is section i's
/// `(producer_id, producer_epoch, base_sequence)`; `transactional`: the batches are written in a transaction.
#[pyfunction]
#[pyo3(signature = (sections, stamps, *, codec="none", level=None, transactional=false))]
fn seal_sections<'py>(py: Python<'py>, sections: Vec<Bound<'py, Section>>, stamps: Vec<(i64, i16, i32)>,
                      codec: &str, level: Option<i32>, transactional: bool) -> PyResult<Vec<Bound<'py, PyBytes>>> {
    if sections.len() != stamps.len() {
        return Err(PyValueError::new_err(format!("{} sections but {} stamps", sections.len(), stamps.len())));
    }
    let (c, l) = codec_level(codec, level)?;
    let jobs: Vec<(&stored::Section, Producer)> = sections.iter().zip(&stamps)
        .map(|(s, &(id, epoch, base_sequence))| (&s.get().inner, Producer { id, epoch, base_sequence, transactional }))
        .collect();
    let sealed = crate::pool_cpu::par_map(py, &jobs, |(s, p)| stored::seal_section(s, c, l, *p));
    sealed.into_iter().map(|r| r.map(|b| PyBytes::new(py, &b)).map_err(io_err)).collect()
}

/// The batch under another producer id, epoch and base sequence (header and CRC only; no recompression).
/// `transactional`: None keeps its attributes as they are (the transactional bit among them); True sets the bit,
/// False clears it (the CRC computed after).
#[pyfunction]
#[pyo3(signature = (batch, producer_id, producer_epoch, base_sequence, *, transactional=None))]
fn restamp<'py>(py: Python<'py>, batch: &Bound<'py, PyBytes>, producer_id: i64, producer_epoch: i16,
                base_sequence: i32, transactional: Option<bool>) -> PyResult<Bound<'py, PyBytes>> {
    let producer = Producer { id: producer_id, epoch: producer_epoch, base_sequence, transactional: false };
    let out = stored::restamp(batch.as_bytes(), producer, transactional).map_err(PyValueError::new_err)?;
    Ok(PyBytes::new(py, &out))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<StoredRecords>()?;
    m.add_class::<Section>()?;
    m.add_class::<Rebatcher>()?;
    m.add_function(wrap_pyfunction!(decode_stored, m)?)?;
    m.add_function(wrap_pyfunction!(seal_sections, m)?)?;
    m.add_function(wrap_pyfunction!(restamp, m)?)?;
    Ok(())
}
