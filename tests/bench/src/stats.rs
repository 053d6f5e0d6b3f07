//! Percentiles of a sample (nearest rank).

#[derive(Debug, Clone, Copy, Default)]
pub struct Summary {
    pub n: usize,
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
    pub min: f64,
}

impl Summary {
    pub fn of(mut sample: Vec<f64>) -> Summary {
        if sample.is_empty() {
            return Summary::default();
        }
        sample.sort_by(|a, b| a.total_cmp(b));
        let at = |p: f64| sample[((sample.len() - 1) as f64 * p).round() as usize];
        Summary {
            n: sample.len(),
            p50: at(0.5),
            p99: at(0.99),
            max: sample[sample.len() - 1],
            min: sample[0],
        }
    }
}
