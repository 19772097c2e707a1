//! The instruction set the hand-written kernels run on: chosen once per process from the
//! CPU (the widest it has), or forced lower with the environment variable `SAINTFLOW_ISA`
//! (`avx512`, `avx2`, `generic`) so that every path can be tested and benchmarked on
//! whichever machine is at hand (an AVX-512 Xeon runs the AVX2 path a Zen 3 would).
//!
//! A forced set the CPU lacks falls back to the widest it has below it: a kernel never
//! executes an instruction the CPU cannot run. An unknown value is ignored by the kernels
//! and refused by the command line ([`Isa::from_env`] says why). Every kernel with ISA
//! variants (GEMM, SpMM, SGNS, the `wide` elementwise loops) reads [`Isa::current`];
//! GEMM also takes an explicit [`Isa`] so the tests cover every path in one process.

use std::sync::OnceLock;

/// An instruction-set level of the kernels, widest last.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Isa {
    /// Portable code (SSE4.2 under the crate's default x86-64-v2 build, or any target).
    Generic,
    /// AVX2 with FMA: 8-float vectors, 16 registers (Haswell and later, Zen 1–3).
    Avx2,
    /// AVX-512F (with AVX2 and FMA): 16-float vectors, 32 registers (Skylake-SP and
    /// later Xeons, Zen 4 and later).
    Avx512,
}

/// The environment variable that forces an instruction set.
pub const ISA_ENV: &str = "SAINTFLOW_ISA";

impl Isa {
    /// Every level, widest last.
    pub const ALL: [Isa; 3] = [Isa::Generic, Isa::Avx2, Isa::Avx512];

    /// The name `SAINTFLOW_ISA` takes.
    pub fn name(self) -> &'static str {
        match self {
            Isa::Generic => "generic",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512",
        }
    }

    /// Whether this CPU can run the level.
    pub fn available(self) -> bool {
        match self {
            Isa::Generic => true,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma"),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => {
                is_x86_feature_detected!("avx512f")
                    && is_x86_feature_detected!("avx2")
                    && is_x86_feature_detected!("fma")
            }
            #[cfg(not(target_arch = "x86_64"))]
            _ => false,
        }
    }

    /// The widest level the CPU has.
    pub fn detected() -> Isa {
        Isa::ALL
            .into_iter()
            .rev()
            .find(|i| i.available())
            .unwrap_or(Isa::Generic)
    }

    /// Every level this CPU can run, narrowest first (what the oracle tests cover).
    pub fn supported() -> Vec<Isa> {
        Isa::ALL.into_iter().filter(|i| i.available()).collect()
    }

    /// The level `SAINTFLOW_ISA` asks for: `Ok(None)` when unset or empty, an error
    /// naming the accepted values when it is not one of them.
    pub fn from_env() -> Result<Option<Isa>, String> {
        match std::env::var(ISA_ENV) {
            Err(std::env::VarError::NotPresent) => Ok(None),
            Err(std::env::VarError::NotUnicode(v)) => {
                Err(format!("{ISA_ENV}: not UTF-8: {v:?}; expected avx512, avx2 or generic"))
            }
            Ok(v) if v.trim().is_empty() => Ok(None),
            Ok(v) => Isa::ALL
                .into_iter()
                .find(|i| i.name().eq_ignore_ascii_case(v.trim()))
                .map(Some)
                .ok_or_else(|| {
                    format!("{ISA_ENV}: unknown instruction set {v:?}; expected avx512, avx2 or generic")
                }),
        }
    }

    /// The level kernels run at: `SAINTFLOW_ISA` capped at what the CPU has, else the
    /// widest the CPU has. Read once per process.
    pub fn current() -> Isa {
        static CURRENT: OnceLock<Isa> = OnceLock::new();
        *CURRENT.get_or_init(|| match Isa::from_env() {
            Ok(Some(want)) => want.capped(),
            _ => Isa::detected(),
        })
    }

    /// `self` if the CPU has it, else the widest level below it that it has.
    pub fn capped(self) -> Isa {
        Isa::ALL
            .into_iter()
            .rev()
            .find(|i| *i <= self && i.available())
            .unwrap_or(Isa::Generic)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_are_ordered_and_capped_to_the_cpu() {
        assert!(Isa::Generic < Isa::Avx2 && Isa::Avx2 < Isa::Avx512);
        assert!(Isa::Generic.available());
        let best = Isa::detected();
        assert!(best.available());
        assert_eq!(Isa::Avx512.capped(), best);
        assert_eq!(Isa::Generic.capped(), Isa::Generic);
        assert!(Isa::current() <= best);
        assert_eq!(*Isa::supported().last().unwrap(), best);
        for i in Isa::supported() {
            assert_eq!(i.capped(), i);
        }
    }
}
