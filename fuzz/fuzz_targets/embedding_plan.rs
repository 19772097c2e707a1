//! libFuzzer entry of the `embedding_plan` target; the body is `saintflow_fuzz::embedding_plan` (shared with
//! the replay test).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| saintflow_fuzz::embedding_plan(data));
