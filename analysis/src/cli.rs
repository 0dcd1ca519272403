//! What `analyze` and `sweep` share on the command line: a usage error is one line on
//! stderr and exit status 2 (`analysis/tests/cli.rs` pins it), never clap's multi-line
//! usage block.

/// Parses the command line. A usage error prints clap's first line only and exits with
/// status 2 (clap's own output adds a blank line and a tip); `--help` and `--version`
/// print as usual and exit 0.
pub fn parse_args_or_exit<T: clap::Parser>() -> T {
    T::try_parse().unwrap_or_else(|e| {
        if !e.use_stderr() {
            e.exit()
        }
        let rendered = e.to_string();
        eprintln!(
            "{}",
            rendered.lines().next().unwrap_or("error: bad arguments")
        );
        std::process::exit(2)
    })
}
