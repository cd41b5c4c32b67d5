//! What GPUs a plan may use: GPU models with a cost each and an optional
//! limit on how many are available.

use std::fmt;
use std::str::FromStr;

use crate::error::CoreError;
use crate::gpu::GpuModel;

/// One GPU model offered to the planner.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GpuOffer {
    /// The GPU model.
    pub model: GpuModel,
    /// Cost of one GPU, in any unit shared by the fleet (default 1).
    pub cost: f64,
    /// Most GPUs of this model available; `None` for unlimited.
    pub limit: Option<u64>,
}

impl GpuOffer {
    /// An unlimited offer at cost 1.
    pub const fn plain(model: GpuModel) -> Self {
        GpuOffer { model, cost: 1.0, limit: None }
    }
}

impl fmt::Display for GpuOffer {
    /// The text [`GpuOffer::from_str`] reads, with only the settings that
    /// differ from [`GpuOffer::plain`]: `a100-80gb`,
    /// `h100-80gb:cost=1.6,count=16`, `a30-24gb:count=4`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.model)?;
        let cost = (self.cost != 1.0).then(|| format!("cost={}", self.cost));
        let count = self.limit.map(|limit| format!("count={limit}"));
        let settings: Vec<String> = cost.into_iter().chain(count).collect();
        if !settings.is_empty() {
            write!(f, ":{}", settings.join(","))?;
        }
        Ok(())
    }
}

// An offer travels as its text (`"h100-80gb:cost=1.6,count=16"`), as on
// the command line.
crate::serde_as_text!(GpuOffer);

impl FromStr for GpuOffer {
    type Err = CoreError;

    /// `MODEL[:cost=C][,count=N]`, e.g. `h100-80gb:cost=1.6,count=16`; the
    /// settings may follow the model after `:` or `,` (`a100-80gb,count=8`).
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let (model, settings) = text.split_once([':', ',']).unwrap_or((text, ""));
        let mut offer = GpuOffer::plain(model.parse()?);
        for setting in settings.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            match setting.split_once('=') {
                Some(("cost", value)) => {
                    offer.cost = value
                        .parse::<f64>()
                        .ok()
                        .filter(|cost| cost.is_finite() && *cost > 0.0)
                        .ok_or_else(|| CoreError::invalid("cost", "a positive number", value))?;
                }
                Some(("count", value)) => {
                    offer.limit = Some(
                        value
                            .parse::<u64>()
                            .ok()
                            .filter(|count| *count > 0)
                            .ok_or_else(|| CoreError::invalid("count", "a positive whole number", value))?,
                    );
                }
                _ => return Err(CoreError::invalid("GPU setting", "cost=C or count=N", setting)),
            }
        }
        Ok(offer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cost_and_count() {
        let offer: GpuOffer = "h100-80gb:cost=1.6,count=16".parse().unwrap();
        assert_eq!(offer, GpuOffer { model: GpuModel::H100_80GB, cost: 1.6, limit: Some(16) });
        assert_eq!("a100-80gb".parse::<GpuOffer>().unwrap(), GpuOffer::plain(GpuModel::A100_80GB));
        assert_eq!(offer.to_string().parse::<GpuOffer>().unwrap(), offer);
        let count_only = GpuOffer { limit: Some(8), ..GpuOffer::plain(GpuModel::A100_80GB) };
        assert_eq!("a100-80gb,count=8".parse::<GpuOffer>().unwrap(), count_only, "as the syntax MODEL[,count=N] reads");
        for text in ["a100-80gb", "a30-24gb:count=4", "h100-80gb:cost=1.6", "h100-80gb:cost=1.6,count=16"] {
            assert_eq!(text.parse::<GpuOffer>().unwrap().to_string(), text, "the canonical text round-trips");
        }
    }

    #[test]
    fn travels_as_its_text() {
        let offer: GpuOffer = "h100-80gb:cost=1.6,count=16".parse().unwrap();
        let json = serde_json::to_string(&offer).unwrap();
        assert_eq!(json, "\"h100-80gb:cost=1.6,count=16\"");
        assert_eq!(serde_json::from_str::<GpuOffer>(&json).unwrap(), offer);
        let error = serde_json::from_str::<GpuOffer>("\"v100\"").unwrap_err().to_string();
        assert!(error.contains("v100"), "{error}");
    }

    #[test]
    fn rejects_bad_settings() {
        for bad in ["v100:cost=1", "a100-80gb:cost=-1", "a100-80gb:count=0", "a100-80gb:speed=2", "a100-80gb:cost=x"] {
            assert!(bad.parse::<GpuOffer>().is_err(), "{bad}");
        }
        let message = "a100-80gb:cost=-1".parse::<GpuOffer>().unwrap_err().to_string();
        assert!(message.contains("cost") && message.contains("-1"), "{message}");
    }
}
