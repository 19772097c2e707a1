//! libFuzzer entry of the `checkpoint` target; the body is `saintflow_fuzz::checkpoint` (shared with the
//! replay test).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| saintflow_fuzz::checkpoint(data));
