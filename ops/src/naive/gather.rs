//! Naive row gather and scatter-add: element by element.

use num_traits::Float;

/// out\[i\]\[j\] = src\[ids\[i\]\]\[j\].
pub fn gather_rows<T: Float>(src: &[T], f: usize, ids: &[u32], out: &mut [T]) {
    for (i, &v) in ids.iter().enumerate() {
        for j in 0..f {
            out[i * f + j] = src[v as usize * f + j];
        }
    }
}

/// dst\[ids\[i\]\]\[j\] += grad\[i\]\[j\], in `ids` order.
pub fn scatter_add_rows<T: Float>(grad: &[T], f: usize, ids: &[u32], dst: &mut [T]) {
    for (i, &v) in ids.iter().enumerate() {
        for j in 0..f {
            dst[v as usize * f + j] = dst[v as usize * f + j] + grad[i * f + j];
        }
    }
}
