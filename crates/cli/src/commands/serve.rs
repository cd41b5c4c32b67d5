//! `tessera serve`: the HTTP service (tessera-server) over the store.

use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Result};
use tessera_server::{ApiToken, ServeConfig, MIN_TOKEN_BYTES};

use crate::args::ServeArgs;
use crate::inputs::store_path;
use crate::output::note;

/// The environment variable that holds the token when no file is given.
const TOKEN_VARIABLE: &str = "TESSERA_TOKEN";

pub fn run(args: &ServeArgs, store: Option<&Path>) -> Result<()> {
    let token = match &args.token_file {
        Some(path) => ApiToken::from_file(path)?,
        None => match std::env::var(TOKEN_VARIABLE) {
            Ok(value) => ApiToken::new(&value, TOKEN_VARIABLE)?,
            Err(_) => bail!(
                "no API token: pass --token-file FILE or set {TOKEN_VARIABLE} (at least {MIN_TOKEN_BYTES} characters)"
            ),
        },
    };
    let mut config = ServeConfig::new(args.listen, store_path(store)?, token);
    config.public_reads = args.public_reads;
    config.allow_remote = args.allow_remote;
    config.planning_workers = args.workers as usize;
    config.request_timeout = Duration::from_secs_f64(args.request_timeout);
    config.header_timeout = Duration::from_secs_f64(args.header_timeout);
    config.max_body_bytes = args.max_body_mib as usize * 1024 * 1024;
    let store = config.store_path.display().to_string();
    tessera_server::run(config, |address| {
        note(format_args!("serving {store} on http://{address}/ (API: /openapi.json, docs: /docs); Ctrl-C stops"))
    })?;
    Ok(())
}
