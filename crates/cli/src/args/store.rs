//! `tessera store …`: the store itself.

use clap::Subcommand;

use super::ListFormat;

/// `tessera store …`.
#[derive(Debug, Subcommand)]
pub enum StoreCommand {
    /// Show the store's path, schema version and how many profiles,
    /// workloads, colocations, imports and journal entries it holds.
    Info {
        /// Output format.
        #[arg(long, value_enum, default_value_t = ListFormat::Table)]
        format: ListFormat,
    },
    /// Upgrade the store's schema to this version of Tessera (any command
    /// that writes to the store does too; commands that only read need it).
    Migrate,
}
