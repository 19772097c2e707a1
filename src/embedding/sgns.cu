// The SGD of one grid block on an NVIDIA GPU (issue 30; GraphVite §3.2, Alg. 1's inner loop).
// Compiled at run time by NVRTC (src/embedding/cuda.rs) with -DDIM=<embedding width> and
// --fmad=false, so every product and sum is rounded as the CPU kernel rounds it.
//
// A sample (u, v) and its negatives x_1..x_k take one half-warp (16 lanes): lane L holds
// elements L, L+16, L+32, … of the rows, which is how the CPU kernel (saintflow_ops::sgns)
// splits a row into its 16 lanes, and the dot product is combined by the same pairwise
// tree (8, 4, 2, 1): one half-warp gives the CPU kernel's bits, the negatives are the same
// counter-based draws (src/embedding/device.rs), and the learning rate follows the same
// clock. Many half-warps at once share rows without locks (Hogwild, as GraphVite's GPU
// workers do); the grid keeps every row a block touches inside the block's two parts.
//
// Rows are read and written through L2 only (ld/st .cg): an SM's L1 is not kept coherent
// with the other SMs' stores, and a row held there would be read stale and written back
// over their updates. (Measured on an H200: with plain loads a 512-node graph, whose rows
// all fit one L1, did not train at all on 8 SMs, while one SM trained it.)

typedef unsigned long long u64;
typedef unsigned int u32;

#define HALF 16
#define PER ((DIM + HALF - 1) / HALF)
#define MAX_LOGIT 15.0f

// SplitMix64's finaliser and hash3: saintflow::seed, bit for bit.
__device__ __forceinline__ u64 mix64(u64 z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

__device__ __forceinline__ u64 hash3(u64 seed, u64 stream, u64 index) {
    return mix64(mix64(seed ^ (stream * 0x9e3779b97f4a7c15ULL)) + index);
}

// σ(s) with s clamped to ±15. exp in double, rounded once to f32: the correctly rounded
// e^−s that the CPU's expf returns.
__device__ __forceinline__ float sigmoid(float s) {
    s = fminf(fmaxf(s, -MAX_LOGIT), MAX_LOGIT);
    return 1.0f / (1.0f + (float)exp(-(double)s));
}

// −w·log σ(±s), in double (saintflow_ops::sgns::sgns_loss).
__device__ __forceinline__ double sgns_loss(float s, bool positive, float w) {
    double z = positive ? (double)s : -(double)s;
    return (double)w * (fmax(-z, 0.0) + log1p(exp(-fabs(z))));
}

// One term: s = u·c, g = lr·w·(y − σ(s)), acc += g·c, c += g·u. Returns s.
__device__ __forceinline__ float term(const float* u, float* acc, float* crow, float y,
                                      float w, float lr, u32 lane, unsigned mask) {
    float c[PER];
    float d = 0.0f;
#pragma unroll
    for (int m = 0; m < PER; ++m) {
        int e = lane + HALF * m;
        c[m] = e < DIM ? __ldcg(crow + e) : 0.0f;
        if (e < DIM) d = d + u[m] * c[m];
    }
    d = d + __shfl_down_sync(mask, d, 8, HALF);
    d = d + __shfl_down_sync(mask, d, 4, HALF);
    d = d + __shfl_down_sync(mask, d, 2, HALF);
    d = d + __shfl_down_sync(mask, d, 1, HALF);
    float s = __shfl_sync(mask, d, 0, HALF);
    float g = lr * w * (y - sigmoid(s));
#pragma unroll
    for (int m = 0; m < PER; ++m) {
        int e = lane + HALF * m;
        if (e < DIM) {
            acc[m] = acc[m] + g * c[m];
            __stcg(crow + e, c[m] + g * u[m]);
        }
    }
    return s;
}

// Block (i, j) of the grid: samples lo..lo+count of the block, which lie in the pool in
// `nseg` segments (segment s: pool offsets seg_start[s].., block positions
// prefix[s]..prefix[s+1]). `vertex` holds part i's rows and `context` part j's, indexed by
// `local_of`; the negatives come from part j's alias table (thr, alias: noise_len
// columns, part-local). touch_v/touch_c (null: off) record, per global row, the bit of the
// block's vertex part (tests check that a round's blocks are disjoint).
extern "C" __global__ void sgns_block(
    float* vertex, float* context, const u64* __restrict__ pairs,
    const u32* __restrict__ local_of, const u64* __restrict__ seg_start,
    const u64* __restrict__ prefix, u32 nseg, u64 count, u64 lo,
    const u32* __restrict__ thr, const u32* __restrict__ alias, u32 noise_len,
    const u32* __restrict__ members_j, u32* touch_v, u32* touch_c, u32 touch_bit,
    u64 seed, float lr0, double at, double step, double total, u32 negatives,
    float neg_weight, double* loss_sum, u64* loss_count) {
    const u32 lane = threadIdx.x & (HALF - 1);
    const unsigned mask = (threadIdx.x & HALF) ? 0xffff0000u : 0x0000ffffu;
    const u64 first = ((u64)blockIdx.x * blockDim.x + threadIdx.x) / HALF;
    const u64 stride = ((u64)gridDim.x * blockDim.x) / HALF;
    double lsum = 0.0;
    u64 lcount = 0;
    for (u64 t = first; t < count; t += stride) {
        const u64 g = lo + t;
        u32 a = 0, b = nseg;
        while (b - a > 1) {
            u32 mid = (a + b) / 2;
            if (prefix[mid] <= g) a = mid; else b = mid;
        }
        const u64 x = pairs[seg_start[a] + (g - prefix[a])];
        const u32 gu = (u32)(x >> 32), gv = (u32)x;
        float* urow = vertex + (u64)local_of[gu] * DIM;
        float u[PER], acc[PER];
#pragma unroll
        for (int m = 0; m < PER; ++m) {
            int e = lane + HALF * m;
            u[m] = e < DIM ? __ldcg(urow + e) : 0.0f;
            acc[m] = 0.0f;
        }
        if (touch_v != 0 && lane == 0) {
            atomicOr(&touch_v[gu], touch_bit);
            atomicOr(&touch_c[gv], touch_bit);
        }
        const float lr = lr0 * (float)fmax(1.0 - (at + (double)t * step) / total, 1e-4);
        const bool sample_loss = (t % 16) == 0;
        float s = term(u, acc, context + (u64)local_of[gv] * DIM, 1.0f, 1.0f, lr, lane, mask);
        double loss = sample_loss ? sgns_loss(s, true, 1.0f) : 0.0;
        if (noise_len > 0) {
            for (u32 k = 0; k < negatives; ++k) {
                const u64 h = hash3(seed, (u64)k, g);
                const u32 col = (u32)(((h >> 32) * (u64)noise_len) >> 32);
                const u32 neg = ((u32)h < thr[col]) ? col : alias[col];
                if (touch_v != 0 && lane == 0) atomicOr(&touch_c[members_j[neg]], touch_bit);
                s = term(u, acc, context + (u64)neg * DIM, 0.0f, neg_weight, lr, lane, mask);
                if (sample_loss) loss += sgns_loss(s, false, neg_weight);
            }
        }
#pragma unroll
        for (int m = 0; m < PER; ++m) {
            int e = lane + HALF * m;
            if (e < DIM) __stcg(urow + e, u[m] + acc[m]);
        }
        if (sample_loss) {
            lsum += loss;
            lcount += 1;
        }
    }
    if (lane == 0 && lcount > 0) {
        atomicAdd(loss_sum, lsum);
        atomicAdd(loss_count, lcount);
    }
}
