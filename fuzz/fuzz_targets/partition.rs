//! libFuzzer entry of the `partition` target; the body is `saintflow_fuzz::partition` (shared with
//! the replay test).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| saintflow_fuzz::partition(data));
