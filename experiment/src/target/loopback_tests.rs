//! Loopback tests of the HTTP shell.
