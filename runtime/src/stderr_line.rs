//! One line on stderr, the log of the servers and the notes of the commands.

use std::io::Write;

/// Writes `line` and a newline to stderr. A stderr that cannot take it (closed by whoever
/// started the process, a full disk) loses the line, never the process: `eprintln!` panics
/// there, which ended a language server whose editor stopped reading its stderr at its first
/// log line.
pub fn stderr_line(line: std::fmt::Arguments<'_>) {
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}
