//! Traffic as observed: how bursty each service's arrivals are, from its
//! request counts in equal windows, and the arrival model the fleet is
//! planned under.
//!
//! For a renewal process whose inter-arrival times have coefficient of
//! variation `cv`, the counts in windows holding many arrivals have
//! variance `cv²` times their mean (the index of dispersion). The variance
//! is taken from successive differences (half the mean squared step), so
//! that a rate moving slowly over the windows does not read as burstiness;
//! `cv` is the square root of that index. Windows of a few seconds to a
//! minute see the burstiness the serving queues feel.
//!
//! One model plans the whole fleet, so it follows the burstiest service
//! with enough data: up at once (rounded up to a tenth), down only when
//! the burstiest service has calmed by more than [`LOWER_BY_CV`], and
//! never below Poisson (a smoother stream than Poisson is planned as
//! Poisson, which is conservative for it). A model the operator chose
//! that is not a renewal process (on/off, a trace) is kept.

use tessera_serving::ArrivalModel;

/// Fewest windows an estimate is made from.
pub const MIN_WINDOWS: usize = 20;

/// Fewest requests per window, on average, an estimate is made from.
pub const MIN_REQUESTS_PER_WINDOW: f64 = 20.0;

/// Below this coefficient of variation a stream is planned as Poisson.
pub const POISSON_BELOW_CV: f64 = 1.15;

/// The fleet's model is lowered only when the burstiest service's
/// coefficient of variation lies this far below it.
pub const LOWER_BY_CV: f64 = 0.3;

/// The largest coefficient of variation a renewal model takes.
const MAX_CV: f64 = 10.0;

/// The coefficient of variation of a service's inter-arrival times
/// estimated from its request counts in equal successive windows (see the
/// module documentation), or why there is none (too few windows or
/// requests, a count that is not a number).
pub fn estimate_cv(counts: &[f64]) -> Result<f64, String> {
    if let Some(bad) = counts.iter().find(|c| !(c.is_finite() && **c >= 0.0)) {
        return Err(format!("a window count of {bad} is not a count"));
    }
    if counts.len() < MIN_WINDOWS {
        return Err(format!("{} windows of counts, fewer than the {MIN_WINDOWS} an estimate needs", counts.len()));
    }
    let mean = counts.iter().sum::<f64>() / counts.len() as f64;
    if mean < MIN_REQUESTS_PER_WINDOW {
        return Err(format!(
            "{mean:.1} requests per window, fewer than the {MIN_REQUESTS_PER_WINDOW} an estimate needs"
        ));
    }
    let steps = counts.windows(2).map(|pair| (pair[1] - pair[0]).powi(2)).sum::<f64>();
    let variance = steps / (2.0 * (counts.len() - 1) as f64);
    Ok((variance / mean).sqrt())
}

/// A service's estimated coefficient of variation.
#[derive(Debug, Clone, PartialEq)]
pub struct ObservedCv {
    /// The service.
    pub service: String,
    /// Its inter-arrival times' estimated coefficient of variation.
    pub cv: f64,
}

/// A new arrival model for the fleet, and why, in words.
#[derive(Debug, Clone, PartialEq)]
pub struct ArrivalsChange {
    /// The model plans are made under from now on.
    pub model: ArrivalModel,
    /// Why, e.g. "arrivals now cv=1.8: search-ranking arrives at cv 1.74".
    pub words: String,
}

/// The coefficient of variation of a renewal model (Poisson: 1); `None`
/// for other models.
pub fn renewal_cv(model: &ArrivalModel) -> Option<f64> {
    match model {
        ArrivalModel::Poisson => Some(1.0),
        ArrivalModel::Renewal { cv } => Some(*cv),
        _ => None,
    }
}

/// The model the fleet should be planned under given `observed` (services
/// with an estimate) and the `current` one, when it should change (see the
/// module documentation); `None` to keep the current one.
pub fn observed_arrivals(current: &ArrivalModel, observed: &[ObservedCv]) -> Option<ArrivalsChange> {
    let current_cv = renewal_cv(current)?;
    let burstiest = observed.iter().filter(|o| o.cv.is_finite()).max_by(|a, b| a.cv.total_cmp(&b.cv))?;
    let target_cv = ((burstiest.cv * 10.0).ceil() / 10.0).min(MAX_CV);
    let model =
        if target_cv < POISSON_BELOW_CV { ArrivalModel::Poisson } else { ArrivalModel::Renewal { cv: target_cv } };
    let planned_cv = renewal_cv(&model).expect("a renewal model");
    let burstier = planned_cv > current_cv + 1e-9;
    let calmer = planned_cv < current_cv && burstiest.cv < current_cv - LOWER_BY_CV;
    (burstier || calmer).then(|| ArrivalsChange {
        words: format!(
            "arrivals now {model} (were {current}): the burstiest service, {}, arrives at cv {:.2}",
            burstiest.service, burstiest.cv
        ),
        model,
    })
}

#[cfg(test)]
mod tests {
    use tessera_core::rng::SplitMix64;

    use super::*;

    /// Counts in `windows` windows of `window_s` of a renewal stream at
    /// `rate_rps` whose inter-arrival times have coefficient of variation
    /// `cv` (two-phase hyperexponential above 1, exponential at 1).
    fn counts(rate_rps: f64, cv: f64, window_s: f64, windows: usize, seed: u64) -> Vec<f64> {
        let mut rng = SplitMix64::new(seed);
        let mean_s = 1.0 / rate_rps;
        // Balanced means: phase i with probability p_i and mean mean_s / (2 p_i).
        let p = 0.5 * (1.0 + ((cv * cv - 1.0) / (cv * cv + 1.0)).sqrt());
        let mut counts = vec![0.0; windows];
        let mut t = 0.0;
        loop {
            let u = rng.uniform(0.0, 1.0).max(1e-300);
            let phase_mean = if rng.uniform(0.0, 1.0) < p { mean_s / (2.0 * p) } else { mean_s / (2.0 * (1.0 - p)) };
            t += -u.ln() * phase_mean;
            let window = (t / window_s) as usize;
            if window >= windows {
                return counts;
            }
            counts[window] += 1.0;
        }
    }

    #[test]
    fn poisson_counts_read_as_cv_one_and_bursty_ones_as_their_cv() {
        let poisson = estimate_cv(&counts(100.0, 1.0, 10.0, 120, 1)).unwrap();
        assert!((poisson - 1.0).abs() < 0.15, "{poisson}");
        let bursty = estimate_cv(&counts(100.0, 2.0, 10.0, 120, 2)).unwrap();
        assert!((bursty - 2.0).abs() < 0.3, "{bursty}");
    }

    #[test]
    fn a_rate_that_moves_slowly_is_not_burstiness() {
        // Poisson counts on a rate rising from 50 to 150 req/s.
        let mut rising = counts(100.0, 1.0, 10.0, 120, 3);
        for (i, count) in rising.iter_mut().enumerate() {
            *count += (i as f64 / 119.0 - 0.5) * 1000.0;
        }
        let cv = estimate_cv(&rising).unwrap();
        assert!(cv < 1.2, "{cv}");
    }

    #[test]
    fn too_little_data_gives_no_estimate_and_says_why() {
        assert!(estimate_cv(&[100.0; 5]).unwrap_err().contains("5 windows"));
        assert!(estimate_cv(&[3.0; 40]).unwrap_err().contains("3.0 requests per window"));
        assert!(estimate_cv(&[f64::NAN; 40]).unwrap_err().contains("not a count"));
    }

    fn observed(pairs: &[(&str, f64)]) -> Vec<ObservedCv> {
        pairs.iter().map(|(service, cv)| ObservedCv { service: service.to_string(), cv: *cv }).collect()
    }

    #[test]
    fn the_fleet_follows_the_burstiest_service_up_at_once_and_down_late() {
        let poisson = ArrivalModel::Poisson;
        assert_eq!(observed_arrivals(&poisson, &observed(&[("a", 1.05), ("b", 0.7)])), None);
        let change = observed_arrivals(&poisson, &observed(&[("a", 1.05), ("b", 1.74)])).unwrap();
        assert_eq!(change.model, ArrivalModel::Renewal { cv: 1.8 });
        assert!(change.words.contains("b, arrives at cv 1.74") && change.words.contains("were poisson"));
        let cv18 = change.model;
        assert_eq!(observed_arrivals(&cv18, &observed(&[("b", 1.6)])), None, "calmer, but within the hysteresis");
        assert_eq!(
            observed_arrivals(&cv18, &observed(&[("b", 1.45)])).unwrap().model,
            ArrivalModel::Renewal { cv: 1.5 }
        );
        assert_eq!(observed_arrivals(&cv18, &observed(&[("b", 1.0)])).unwrap().model, ArrivalModel::Poisson);
        assert_eq!(observed_arrivals(&cv18, &[]), None, "no estimate: the model held");
        let onoff = ArrivalModel::OnOff { burst: 3.0, mean_on_s: 1.0, mean_off_s: 4.0 };
        assert_eq!(observed_arrivals(&onoff, &observed(&[("b", 3.0)])), None, "the operator's on/off model kept");
    }
}
