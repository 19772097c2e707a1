//! libFuzzer entry of the `store_step` target; the body is `saintflow_fuzz::store_step` (shared with the
//! replay test).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| saintflow_fuzz::store_step(data));
