//! libFuzzer entry of the `safetensors` target; the body is `saintflow_fuzz::safetensors`
//! (shared with the replay test).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| saintflow_fuzz::safetensors(data));
