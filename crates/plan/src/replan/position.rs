//! A GPU of a plan by where it is: node and index within the node.

use std::fmt;

/// One GPU of a plan, by node and index within the node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GpuPosition {
    /// Node number.
    pub node: u32,
    /// GPU index within the node.
    pub index: u32,
}

impl fmt::Display for GpuPosition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.node, self.index)
    }
}

impl std::str::FromStr for GpuPosition {
    type Err = String;

    /// `NODE:GPU`, both whole numbers, e.g. `0:3`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let parsed = text.split_once(':').and_then(|(node, index)| Some((node.parse().ok()?, index.parse().ok()?)));
        parsed
            .map(|(node, index)| GpuPosition { node, index })
            .ok_or_else(|| format!("expected NODE:GPU as whole numbers, e.g. 0:3, got '{text}'"))
    }
}

// A position travels as its text, `NODE:GPU`.
tessera_core::serde_as_text!(GpuPosition);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_it_writes_and_refuses_the_rest() {
        let position: GpuPosition = "12:3".parse().unwrap();
        assert_eq!(position, GpuPosition { node: 12, index: 3 });
        assert_eq!(position.to_string().parse::<GpuPosition>().unwrap(), position);
        for bad in ["3", "a:1", "1:-1", "1:2:3", ""] {
            let error = bad.parse::<GpuPosition>().unwrap_err();
            assert!(error.contains(&format!("'{bad}'")), "{error}");
        }
    }
}
