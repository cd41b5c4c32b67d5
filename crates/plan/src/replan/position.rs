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
