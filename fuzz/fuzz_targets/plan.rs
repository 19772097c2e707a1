//! libFuzzer entry of the `plan` target; the body is `saintflow_fuzz::plan` (shared with the
//! replay test).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| saintflow_fuzz::plan(data));
