//! Oracle of [`crate::sgns`]: the same step written as the definition, one element at a
//! time in f64 (sums and products), rounded to f32 on store. Also the bench baseline.

/// u·c in f64, then the term's update as [`crate::sgns::sgns_term`] defines it.
pub fn sgns_term(
    u: &[f32],
    c: &mut [f32],
    acc: &mut [f32],
    positive: bool,
    weight: f32,
    lr: f32,
) -> f32 {
    let d = u.len().min(c.len()).min(acc.len());
    let mut s = 0f64;
    for i in 0..d {
        s += f64::from(u[i]) * f64::from(c[i]);
    }
    let sc = (s as f32).clamp(-crate::sgns::MAX_LOGIT, crate::sgns::MAX_LOGIT);
    let sigma = 1.0 / (1.0 + (-f64::from(sc)).exp());
    let y = if positive { 1.0 } else { 0.0 };
    let g = f64::from(lr) * f64::from(weight) * (y - sigma);
    for i in 0..d {
        acc[i] = (f64::from(acc[i]) + g * f64::from(c[i])) as f32;
        c[i] = (f64::from(c[i]) + g * f64::from(u[i])) as f32;
    }
    s as f32
}

/// u += acc; acc = 0.
pub fn sgns_apply(u: &mut [f32], acc: &mut [f32]) {
    for i in 0..u.len().min(acc.len()) {
        u[i] += acc[i];
        acc[i] = 0.0;
    }
}
