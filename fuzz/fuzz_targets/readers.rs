//! libFuzzer entry of the `readers` target; the body is `saintflow_fuzz::readers` (shared with the
//! replay test).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| saintflow_fuzz::readers(data));
