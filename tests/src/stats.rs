//! Latency percentiles for the benchmarks: an HDR histogram of nanoseconds with three
//! significant digits, so every figure is within 0.1 % of a recorded latency.

use std::time::Duration;

use hdrhistogram::Histogram;

/// Recorded latencies.
#[derive(Debug, Clone)]
pub struct Latencies(Histogram<u64>);

impl Latencies {
    pub fn new() -> Self {
        // Three significant digits is in the valid range (0..=5): this cannot fail.
        Latencies(Histogram::new(3).expect("a valid precision"))
    }

    pub fn record(&mut self, latency: Duration) {
        let nanos = u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX);
        // The histogram grows to fit; past what it can ever track, clamp to its top.
        if self.0.record(nanos).is_err() {
            self.0.saturating_record(nanos);
        }
    }

    /// Latencies given in milliseconds.
    pub fn from_ms(samples: &[f64]) -> Self {
        let mut l = Latencies::new();
        for &ms in samples {
            l.record_ms(ms);
        }
        l
    }

    /// Records a latency given in milliseconds (a negative one counts as zero).
    pub fn record_ms(&mut self, ms: f64) {
        self.record(Duration::try_from_secs_f64(ms / 1e3).unwrap_or_default());
    }

    pub fn len(&self) -> u64 {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The latency at quantile `q` (0.5 the median, 0.99 the p99, 1.0 the largest).
    pub fn quantile(&self, q: f64) -> Duration {
        Duration::from_nanos(self.0.value_at_quantile(q))
    }

    pub fn min(&self) -> Duration {
        Duration::from_nanos(self.0.min())
    }

    pub fn max(&self) -> Duration {
        Duration::from_nanos(self.0.max())
    }

    pub fn mean(&self) -> Duration {
        Duration::from_secs_f64(self.0.mean() / 1e9)
    }
}

impl Default for Latencies {
    fn default() -> Self {
        Self::new()
    }
}

impl FromIterator<Duration> for Latencies {
    fn from_iter<I: IntoIterator<Item = Duration>>(iter: I) -> Self {
        let mut l = Latencies::new();
        for d in iter {
            l.record(d);
        }
        l
    }
}

/// Milliseconds, for printing.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Microseconds, for printing.
pub fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_within_a_tenth_of_a_percent() {
        let l: Latencies = (1..=1000).map(Duration::from_micros).collect();
        assert_eq!(l.len(), 1000);
        let near = |d: Duration, us: f64| (super::us(d) - us).abs() <= us / 1000.0;
        assert!(near(l.quantile(0.5), 500.0), "{:?}", l.quantile(0.5));
        assert!(near(l.quantile(0.99), 990.0), "{:?}", l.quantile(0.99));
        assert!(near(l.max(), 1000.0) && near(l.min(), 1.0));
        assert!(near(l.mean(), 500.5));
        let m = Latencies::from_ms(&[-3.0, 12.5]);
        assert_eq!(m.min(), Duration::ZERO);
        assert!((ms(m.max()) - 12.5).abs() < 0.02);
    }
}
