//! libFuzzer entry of the `torch_pt` target; the body is `saintflow_fuzz::torch_pt` (shared
//! with the replay test).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| saintflow_fuzz::torch_pt(data));
