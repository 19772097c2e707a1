//! libFuzzer entry of the `edgelist` target; the body is `saintflow_fuzz::edgelist` (shared with the
//! replay test).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| saintflow_fuzz::edgelist(data));
