//! A container's arguments as one text cell: a JSON array of strings
//! (`["--name","a b"]`), so an argument may hold spaces, commas or quotes;
//! anything else is split at whitespace. The one reader of the SLO CSV's
//! `args` column.

/// The arguments `text` holds: a JSON array of strings when it starts with
/// `[`, else its whitespace-separated words. The error says what is wrong
/// with a list.
pub fn parse_container_args(text: &str) -> Result<Vec<String>, String> {
    let text = text.trim();
    if !text.starts_with('[') {
        return Ok(text.split_whitespace().map(str::to_string).collect());
    }
    serde_json::from_str::<Vec<String>>(text)
        .map_err(|error| format!("'{text}' is not a JSON list of strings ({error})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_or_a_json_list() {
        assert_eq!(parse_container_args(" --batch {batch}  --fp16 ").unwrap(), ["--batch", "{batch}", "--fp16"]);
        assert_eq!(parse_container_args(r#"["--name","a b","x,y"]"#).unwrap(), ["--name", "a b", "x,y"]);
        assert_eq!(parse_container_args("").unwrap(), Vec::<String>::new());
        assert_eq!(parse_container_args("[]").unwrap(), Vec::<String>::new());
        let error = parse_container_args(r#"["--n", 3]"#).unwrap_err();
        assert!(error.starts_with(r#"'["--n", 3]' is not a JSON list of strings ("#), "{error}");
        assert!(parse_container_args(r#"["open"#).is_err());
    }
}
