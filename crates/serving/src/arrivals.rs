//! How a service's requests arrive: the models, their command-line syntax
//! and their checks. The generators themselves are in `stream`.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use crate::error::ServingError;

/// The largest coefficient of variation a renewal model accepts.
pub const MAX_CV: f64 = 10.0;

/// The syntax of every model, for error messages.
const SYNTAX: &str = "poisson, cv=C, onoff=burst:B,on:SECONDS,off:SECONDS, trace=FILE";

/// An arrival process, scaled to each service's mean rate.
///
/// Each service gets its own stream ([`ArrivalModel::stream`]), seeded by
/// the run's seed and the service's index, so services never share
/// instants by accident.
#[derive(Debug, Clone, PartialEq)]
pub enum ArrivalModel {
    /// Independent exponential inter-arrival times.
    Poisson,
    /// A renewal process whose inter-arrival times have coefficient of
    /// variation `cv` (1 is Poisson; above 1 burstier), in `(0, 10]`:
    /// gamma inter-arrival times for `cv < 1` (shape `1 / cv²`), exponential
    /// for `cv = 1`, and a balanced-means two-phase hyperexponential (H2)
    /// for `cv > 1`. Each has the exact mean and coefficient of variation.
    Renewal {
        /// Standard deviation over mean of the inter-arrival times.
        cv: f64,
    },
    /// A two-state Markov-modulated Poisson process: "on" periods at
    /// `burst` times the mean rate, "off" periods at the rate that keeps
    /// the mean (`rate × (on + off − burst × on) / off`, so `burst` may not
    /// exceed `1 + off / on`); period lengths exponential with the given
    /// means.
    OnOff {
        /// The on-rate over the mean rate (>= 1; 1 is Poisson).
        burst: f64,
        /// Mean length of an on period, seconds.
        mean_on_s: f64,
        /// Mean length of an off period, seconds.
        mean_off_s: f64,
    },
    /// A replayed trace: arrival instants in seconds, sorted, time-scaled
    /// so that its mean rate is the service's. Build one with
    /// [`ArrivalModel::trace`], which checks and sorts the instants.
    Trace {
        /// A name for reports (e.g. the file's name).
        name: String,
        /// The arrival instants, seconds from the trace's start.
        times_s: Arc<[f64]>,
    },
}

impl ArrivalModel {
    /// Reads the command-line syntax: `poisson`, `cv=C` (a renewal process,
    /// `0 < C <= 10`) or `onoff=burst:B,on:SECONDS,off:SECONDS` (keys in any
    /// order, all three needed). A trace (`trace=FILE`) is read from its
    /// file by the caller and built with [`ArrivalModel::trace`]: here it is
    /// refused. Errors are one line naming the option and the value.
    pub fn parse(text: &str) -> Result<ArrivalModel, ServingError> {
        let text = text.trim();
        let bad = |message: String| ServingError::invalid("arrivals", format!("'{text}': {message}"));
        let number = |key: &str, value: &str| -> Result<f64, ServingError> {
            value.trim().parse::<f64>().map_err(|_| bad(format!("{key} '{}' is not a number", value.trim())))
        };
        let model = match text.split_once('=') {
            None if text == "poisson" => ArrivalModel::Poisson,
            Some(("cv", value)) => ArrivalModel::Renewal { cv: number("cv", value)? },
            Some(("onoff", parameters)) => {
                let (mut burst, mut on, mut off) = (None, None, None);
                for part in parameters.split(',') {
                    let (key, value) = part
                        .split_once(':')
                        .ok_or_else(|| bad(format!("'{}' is not KEY:VALUE (burst, on or off)", part.trim())))?;
                    let slot = match key.trim() {
                        "burst" => &mut burst,
                        "on" => &mut on,
                        "off" => &mut off,
                        other => return Err(bad(format!("unknown key '{other}' (known: burst, on, off)"))),
                    };
                    if slot.replace(number(key.trim(), value)?).is_some() {
                        return Err(bad(format!("{} is given twice", key.trim())));
                    }
                }
                let need = |value: Option<f64>, key: &str| value.ok_or_else(|| bad(format!("{key} is missing")));
                ArrivalModel::OnOff {
                    burst: need(burst, "burst")?,
                    mean_on_s: need(on, "on")?,
                    mean_off_s: need(off, "off")?,
                }
            }
            Some(("trace", _)) => {
                return Err(bad("a trace is read from its file by the program, not parsed here".to_string()))
            }
            _ => return Err(bad(format!("unknown arrival model (known: {SYNTAX})"))),
        };
        model.validate()?;
        Ok(model)
    }

    /// A trace model from arrival instants (seconds, any origin). The
    /// instants are sorted here (merged logs are rarely in order); there
    /// must be at least two, all finite, spanning a positive time.
    pub fn trace(name: impl Into<String>, mut times_s: Vec<f64>) -> Result<ArrivalModel, ServingError> {
        let name = name.into();
        if let Some(position) = times_s.iter().position(|t| !t.is_finite()) {
            return Err(ServingError::invalid(
                "trace",
                format!("{name}: instant {} is {}, not a finite time", position + 1, times_s[position]),
            ));
        }
        times_s.sort_by(f64::total_cmp);
        let model = ArrivalModel::Trace { name, times_s: times_s.into() };
        model.validate()?;
        Ok(model)
    }

    /// Checks the model's parameters, naming the first one out of range.
    pub fn validate(&self) -> Result<(), ServingError> {
        match self {
            ArrivalModel::Poisson => Ok(()),
            ArrivalModel::Renewal { cv } => {
                if cv.is_finite() && *cv > 0.0 && *cv <= MAX_CV {
                    Ok(())
                } else {
                    Err(ServingError::invalid("cv", format!("{cv} is not in (0, {MAX_CV}]")))
                }
            }
            ArrivalModel::OnOff { burst, mean_on_s, mean_off_s } => {
                if !(burst.is_finite() && *burst >= 1.0) {
                    return Err(ServingError::invalid("burst", format!("{burst} is not a number >= 1")));
                }
                for (field, value) in [("on", mean_on_s), ("off", mean_off_s)] {
                    if !(value.is_finite() && *value > 0.0) {
                        return Err(ServingError::invalid(field, format!("{value} s is not a positive period")));
                    }
                }
                let most = 1.0 + mean_off_s / mean_on_s;
                if *burst > most {
                    return Err(ServingError::invalid(
                        "burst",
                        format!(
                            "{burst} with on {mean_on_s} s and off {mean_off_s} s would need a negative off-rate \
                             (at most 1 + off/on = {most})"
                        ),
                    ));
                }
                Ok(())
            }
            ArrivalModel::Trace { name, times_s } => {
                if times_s.len() < 2 {
                    return Err(ServingError::invalid(
                        "trace",
                        format!("{name}: {} instant(s); a trace needs at least 2", times_s.len()),
                    ));
                }
                if let Some(position) = times_s.iter().position(|t| !t.is_finite()) {
                    return Err(ServingError::invalid(
                        "trace",
                        format!("{name}: instant {} is {}, not a finite time", position + 1, times_s[position]),
                    ));
                }
                if let Some(position) = times_s.windows(2).position(|pair| pair[1] < pair[0]) {
                    return Err(ServingError::invalid(
                        "trace",
                        format!("{name}: instant {} comes before instant {}", position + 2, position + 1),
                    ));
                }
                if times_s[times_s.len() - 1] <= times_s[0] {
                    return Err(ServingError::invalid("trace", format!("{name}: every instant is the same")));
                }
                Ok(())
            }
        }
    }
}

impl FromStr for ArrivalModel {
    type Err = ServingError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        ArrivalModel::parse(text)
    }
}

impl fmt::Display for ArrivalModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArrivalModel::Poisson => f.write_str("poisson"),
            ArrivalModel::Renewal { cv } => write!(f, "cv={cv}"),
            ArrivalModel::OnOff { burst, mean_on_s, mean_off_s } => {
                write!(f, "onoff=burst:{burst},on:{mean_on_s},off:{mean_off_s}")
            }
            ArrivalModel::Trace { name, .. } => write!(f, "trace={name}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_syntax_round_trips() {
        for text in ["poisson", "cv=2", "cv=0.5", "onoff=burst:3,on:5,off:20"] {
            let model = ArrivalModel::parse(text).unwrap();
            assert_eq!(model.to_string(), text);
            assert_eq!(ArrivalModel::parse(&model.to_string()).unwrap(), model);
        }
        assert_eq!(
            "onoff= off:20, burst:3 ,on:5".parse::<ArrivalModel>().unwrap(),
            ArrivalModel::OnOff { burst: 3.0, mean_on_s: 5.0, mean_off_s: 20.0 }
        );
    }

    #[test]
    fn bad_syntax_is_one_line_naming_the_option_and_value() {
        let error = |text: &str| ArrivalModel::parse(text).unwrap_err().to_string();
        assert_eq!(error("cv=abc"), "arrivals: 'cv=abc': cv 'abc' is not a number");
        assert_eq!(error("cv=0"), "cv: 0 is not in (0, 10]");
        assert_eq!(error("cv=11"), "cv: 11 is not in (0, 10]");
        assert!(error("gamma").contains("unknown arrival model"), "{}", error("gamma"));
        assert!(error("onoff=burst:3,on:5").contains("off is missing"));
        assert!(error("onoff=burst:3,on:5,off:20,on:2").contains("on is given twice"));
        assert!(error("onoff=burst:3,up:5,off:20").contains("unknown key 'up'"));
        assert!(error("onoff=burst:3,on:0,off:20").starts_with("on: 0 s"));
        assert!(error("trace=azure.csv").contains("read from its file"));
        let negative = error("onoff=burst:6,on:5,off:20");
        assert!(negative.starts_with("burst: 6 with on 5 s and off 20 s would need a negative off-rate"), "{negative}");
        assert!(!negative.contains('\n'));
        // The largest burst the periods allow is accepted (off-rate 0).
        assert!(ArrivalModel::parse("onoff=burst:5,on:5,off:20").is_ok());
    }

    #[test]
    fn a_trace_is_sorted_and_checked() {
        let ArrivalModel::Trace { times_s, .. } = ArrivalModel::trace("t", vec![3.0, 1.0, 2.0]).unwrap() else {
            panic!("not a trace")
        };
        assert_eq!(&times_s[..], &[1.0, 2.0, 3.0]);
        assert!(ArrivalModel::trace("t", vec![1.0]).unwrap_err().to_string().contains("at least 2"));
        assert!(ArrivalModel::trace("t", vec![1.0, 1.0]).unwrap_err().to_string().contains("the same"));
        let error = ArrivalModel::trace("t", vec![0.0, f64::NAN]).unwrap_err().to_string();
        assert_eq!(error, "trace: t: instant 2 is NaN, not a finite time");
        let unsorted = ArrivalModel::Trace { name: "u".into(), times_s: vec![2.0, 1.0].into() };
        assert!(unsorted.validate().unwrap_err().to_string().contains("comes before"));
    }
}
