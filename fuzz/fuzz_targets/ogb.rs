//! libFuzzer entry of the `ogb` target; the body is `saintflow_fuzz::ogb` (shared with the
//! replay test).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| saintflow_fuzz::ogb(data));
