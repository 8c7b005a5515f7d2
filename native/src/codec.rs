//! The codec table: every codec's facts written once — Kafka's name and attribute id, the levels transcoder
//! produces, the default level, the fast levels, what `transcoder evaluate` measures by default. The `Codec`
//! enum's parse, attribute id and level check read these rows, and Python reads them through `codec_table()`
//! (transcoder.codecs.names builds CODECS, ATTRIBUTE_ID, LEVELS, ... from it).
//!
//! A sixth codec: a `Codec` variant and its row here, its arms in `compress` (lib.rs) and `decompress`
//! (stored.rs) — the compiler asks for both — and its name in Python's `Codec` Literal.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

/// libzstd's lowest (fastest) level, ZSTD_minCLevel(): -(1 << 17).
pub const ZSTD_MIN_LEVEL: i32 = -(1 << 17);

/// librdkafka caps `compression.level` at 12 for every codec: levels above it (zstd 13..22) are built by
/// transcoder itself.
pub const LIBRDKAFKA_MAX_LEVEL: i32 = 12;

/// Kafka's compression codecs; a variant's discriminant is its row's index in `CODECS`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Codec {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

/// What `transcoder evaluate` measures of a codec when no `--codecs` is given.
#[derive(Clone, Copy, Debug)]
pub enum Sweep {
    /// The default level only.
    Default,
    /// Every level from max(min, 1) to max.
    Every,
    /// The default level, then these.
    DefaultAnd(&'static [i32]),
}

/// A codec's levels.
#[derive(Clone, Copy, Debug)]
pub struct Levels {
    /// The levels transcoder produces (a destination's or a candidate's `level`, evaluate's `--codecs`).
    pub min: i32,
    pub max: i32,
    /// The level used when none is given.
    pub default: i32,
    /// The lowest fast (negative) level, for a codec that has them: the compressor takes `fast_min..=max`
    /// (0 included); evaluate measures `fast_min..=-1` for Java producers (librdkafka has no fast levels).
    pub fast_min: Option<i32>,
    pub sweep: Sweep,
}

/// One codec's row.
#[derive(Clone, Copy, Debug)]
pub struct CodecRow {
    pub codec: Codec,
    /// Kafka's name (`compression.type`).
    pub name: &'static str,
    /// Kafka's CompressionType id: the low three bits of a v2 batch's attributes.
    pub attribute: i16,
    /// None: the codec has no levels.
    pub levels: Option<Levels>,
}

/// Every codec, in Kafka's id order.
pub const CODECS: [CodecRow; 5] = [
    CodecRow { codec: Codec::None, name: "none", attribute: 0, levels: None },
    CodecRow {
        codec: Codec::Gzip, name: "gzip", attribute: 1,
        levels: Some(Levels { min: 0, max: 9, default: 6, fast_min: None, sweep: Sweep::Every }),
    },
    CodecRow { codec: Codec::Snappy, name: "snappy", attribute: 2, levels: None },
    CodecRow {
        codec: Codec::Lz4, name: "lz4", attribute: 3,
        // the default (fast) and the high-compression levels
        levels: Some(Levels { min: 0, max: 12, default: 0, fast_min: None, sweep: Sweep::DefaultAnd(&[3, 6, 9, 12]) }),
    },
    CodecRow {
        codec: Codec::Zstd, name: "zstd", attribute: 4,
        // zstd's fast levels are negative (zstd --fast=N is level -N), down to libzstd's ZSTD_minCLevel(); Kafka's
        // compression.zstd.level takes the same range (Kafka 3.8+, KIP-390). 0 is libzstd's default.
        levels: Some(Levels { min: 1, max: 22, default: 3, fast_min: Some(ZSTD_MIN_LEVEL), sweep: Sweep::Every }),
    },
];

// Each variant's row sits at its discriminant (checked when compiling).
const _: () = {
    let mut i = 0;
    while i < CODECS.len() {
        assert!(CODECS[i].codec as usize == i);
        i += 1;
    }
};

impl Codec {
    /// This codec's row.
    pub fn row(self) -> &'static CodecRow {
        &CODECS[self as usize]
    }

    pub fn parse(name: &str) -> Result<Codec, String> {
        CODECS.iter().find(|r| r.name == name).map(|r| r.codec).ok_or_else(|| format!("unknown codec '{name}'"))
    }

    /// The batch attribute bits naming the codec.
    pub fn attribute(self) -> i16 {
        self.row().attribute
    }

    /// The codec of a batch's attribute bits (`attributes & 0x07`); None for an id Kafka does not define.
    pub fn from_attribute(id: i16) -> Option<Codec> {
        CODECS.iter().find(|r| r.attribute == id).map(|r| r.codec)
    }

    /// The level used when none is given, and the levels the compressor accepts (Kafka's and librdkafka's, and
    /// the fast ones).
    pub(crate) fn level(self, level: Option<i32>) -> Result<i32, String> {
        let Some(levels) = self.row().levels else { return Ok(0) };
        let (lo, hi) = (levels.fast_min.unwrap_or(levels.min), levels.max);
        let l = level.unwrap_or(levels.default);
        if l < lo || l > hi {
            return Err(format!("{self:?} level {l} is outside {lo}..{hi}").to_lowercase());
        }
        Ok(l)
    }
}

impl Sweep {
    /// The levels measured (None: the default level).
    pub fn levels(self, min: i32, max: i32) -> Vec<Option<i32>> {
        match self {
            Sweep::Default => vec![None],
            Sweep::Every => (min.max(1)..=max).map(Some).collect(),
            Sweep::DefaultAnd(more) => std::iter::once(None).chain(more.iter().copied().map(Some)).collect(),
        }
    }
}

/// The codec table for Python: one dict per codec, in Kafka's id order — `name`, `attribute`, `levels` (`(min,
/// max)` or None), `default_level`, `fast_min` (None without fast levels) and `evaluated` (the levels `transcoder
/// evaluate` measures by default, None for the default level).
#[pyfunction]
pub fn codec_table(py: Python<'_>) -> PyResult<Vec<Bound<'_, PyDict>>> {
    CODECS.iter().map(|r| {
        let d = PyDict::new(py);
        d.set_item("name", r.name)?;
        d.set_item("attribute", r.attribute)?;
        d.set_item("levels", r.levels.map(|l| (l.min, l.max)))?;
        d.set_item("default_level", r.levels.map(|l| l.default))?;
        d.set_item("fast_min", r.levels.and_then(|l| l.fast_min))?;
        let evaluated = match r.levels {
            Some(l) => l.sweep.levels(l.min, l.max),
            None => vec![None],
        };
        d.set_item("evaluated", evaluated)?;
        Ok(d)
    }).collect()
}

/// A records section back from what `compress` (or any Kafka client) wrote for `codec` (the GIL released).
#[pyfunction]
#[pyo3(name = "decompress")]
pub fn decompress_section<'py>(py: Python<'py>, codec: &str, data: &[u8]) -> PyResult<Bound<'py, PyBytes>> {
    let c = Codec::parse(codec).map_err(PyValueError::new_err)?;
    let out = py.detach(|| crate::stored::decompress(c.attribute(), data)).map_err(PyValueError::new_err)?;
    Ok(PyBytes::new(py, &out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_attribute_read_the_rows() {
        for (i, r) in CODECS.iter().enumerate() {
            assert_eq!(Codec::parse(r.name), Ok(r.codec));
            assert_eq!(r.codec.attribute(), i as i16);
            assert_eq!(Codec::from_attribute(r.attribute), Some(r.codec));
        }
        assert_eq!(Codec::parse("brotli"), Err("unknown codec 'brotli'".to_string()));
        assert_eq!(Codec::from_attribute(5), None);
    }

    #[test]
    fn levels_as_the_compressor_has_always_taken_them() {
        assert_eq!(Codec::None.level(None), Ok(0));
        assert_eq!(Codec::Snappy.level(Some(3)), Ok(0));
        assert_eq!(Codec::Gzip.level(None), Ok(6));
        assert_eq!(Codec::Gzip.level(Some(10)), Err("gzip level 10 is outside 0..9".to_string()));
        assert_eq!(Codec::Lz4.level(None), Ok(0));
        assert_eq!(Codec::Lz4.level(Some(12)), Ok(12));
        assert_eq!(Codec::Zstd.level(None), Ok(3));
        assert_eq!(Codec::Zstd.level(Some(0)), Ok(0));
        assert_eq!(Codec::Zstd.level(Some(ZSTD_MIN_LEVEL)), Ok(ZSTD_MIN_LEVEL));
        assert_eq!(Codec::Zstd.level(Some(23)), Err("zstd level 23 is outside -131072..22".to_string()));
    }

    #[test]
    fn evaluate_sweeps() {
        assert_eq!(Sweep::Every.levels(0, 3), vec![Some(1), Some(2), Some(3)]);
        assert_eq!(Sweep::Default.levels(0, 3), vec![None]);
        assert_eq!(Sweep::DefaultAnd(&[3, 6]).levels(0, 12), vec![None, Some(3), Some(6)]);
    }
}
